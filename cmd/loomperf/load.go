package main

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/loom-otel/loom/internal/workload"
)

const (
	// batchRequests is how many requests go into one export (~450 records,
	// close to the SDK batcher's 512).
	batchRequests = 32
	// senders is how many exports may be in flight: enough to saturate the
	// collector when unthrottled.
	senders = 4
	// exportTimeout bounds one export; a slower one counts as refused.
	exportTimeout = 10 * time.Second
)

// workloadConfig is loomgen's traffic with S1, S2 and S3 mixed in.
var workloadConfig = workload.Config{
	Scenarios: []workload.Scenario{workload.S1, workload.S2, workload.S3},
	Affected:  0.12,
	Duration:  1000 * time.Hour, // the load is stopped, not run out
}

// load sends the workload to an OTLP/gRPC endpoint at a fixed rate of
// records (spans and log records) per second, or as fast as the collector
// takes it (rate 0), and counts what the collector accepted and refused.
type load struct {
	accepted, refused atomic.Int64 // records
	failedExports     atomic.Int64
	firstErr          atomic.Pointer[error]

	cancel context.CancelFunc
	done   sync.WaitGroup
	conn   *grpc.ClientConn
}

type exportBatch struct {
	logs   plogotlp.ExportRequest
	traces ptraceotlp.ExportRequest
}

func startLoad(endpoint string, rate float64, seed uint64) (*load, error) {
	cfg := workloadConfig
	cfg.Seed = seed
	gen, err := workload.NewGenerator(cfg)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	l := &load{cancel: cancel, conn: conn}
	batches := make(chan exportBatch, senders)
	l.done.Add(1)
	go func() {
		defer l.done.Done()
		defer close(batches)
		l.generate(ctx, gen, rate, batches)
	}()
	logs, traces := plogotlp.NewGRPCClient(conn), ptraceotlp.NewGRPCClient(conn)
	for range senders {
		l.done.Add(1)
		go func() {
			defer l.done.Done()
			for b := range batches {
				l.send(ctx, logs, traces, b)
			}
		}()
	}
	return l, nil
}

// generate models requests and hands them to the senders in batches,
// pacing records: record n is due n/rate seconds after the start.
func (l *load) generate(ctx context.Context, gen *workload.Generator, rate float64, out chan<- exportBatch) {
	start := time.Now()
	var generated int
	reqs := make([]*workload.Request, 0, batchRequests)
	for ctx.Err() == nil {
		if rate > 0 {
			due := start.Add(time.Duration(float64(generated) / rate * float64(time.Second)))
			if wait := time.Until(due); wait > 0 {
				select {
				case <-ctx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
		reqs = reqs[:0]
		now := time.Now()
		for range batchRequests {
			r := gen.Next(now)
			generated += r.Records()
			reqs = append(reqs, r)
		}
		td, ld := workload.ToPdata(reqs)
		select {
		case out <- exportBatch{plogotlp.NewExportRequestFromLogs(ld), ptraceotlp.NewExportRequestFromTraces(td)}:
		case <-ctx.Done():
			return
		}
	}
}

func (l *load) send(ctx context.Context, logs plogotlp.GRPCClient, traces ptraceotlp.GRPCClient, b exportBatch) {
	exportCtx, cancel := context.WithTimeout(ctx, exportTimeout)
	defer cancel()
	n := int64(b.logs.Logs().LogRecordCount())
	resp, err := logs.Export(exportCtx, b.logs)
	if err == nil {
		l.count(ctx, n, resp.PartialSuccess().RejectedLogRecords(), nil)
	} else {
		l.count(ctx, n, n, err)
	}
	n = int64(b.traces.Traces().SpanCount())
	tresp, err := traces.Export(exportCtx, b.traces)
	if err == nil {
		l.count(ctx, n, tresp.PartialSuccess().RejectedSpans(), nil)
	} else {
		l.count(ctx, n, n, err)
	}
}

func (l *load) count(ctx context.Context, sent, refused int64, err error) {
	if err != nil {
		if ctx.Err() != nil {
			return // the load stopped mid-export: neither accepted nor refused
		}
		l.failedExports.Add(1)
		l.firstErr.CompareAndSwap(nil, &err)
	}
	l.accepted.Add(sent - refused)
	l.refused.Add(refused)
}

// stop ends the load and waits for the exports in flight.
func (l *load) stop() {
	l.cancel()
	l.done.Wait()
	_ = l.conn.Close()
}

// errNoExportFailed is what err says when every export succeeded.
var errNoExportFailed = errors.New("none")

// err is the first export error, or errNoExportFailed.
func (l *load) err() error {
	if p := l.firstErr.Load(); p != nil {
		return *p
	}
	return errNoExportFailed
}
