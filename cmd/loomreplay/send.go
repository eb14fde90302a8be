package main

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/collector/pdata/plog/plogotlp"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"
	"google.golang.org/grpc"
)

// nowNanos is the clock the replay's times are moved to.
var nowNanos = func() int64 { return time.Now().UnixNano() }

// otlp sends batches to an OTLP/gRPC receiver.
type otlp struct {
	traces ptraceotlp.GRPCClient
	logs   plogotlp.GRPCClient
}

func newOTLP(conn *grpc.ClientConn) otlp {
	return otlp{traces: ptraceotlp.NewGRPCClient(conn), logs: plogotlp.NewGRPCClient(conn)}
}

func (o otlp) export(ctx context.Context, b *batch) error {
	if b.traces.SpanCount() > 0 {
		if _, err := o.traces.Export(ctx, ptraceotlp.NewExportRequestFromTraces(b.traces)); err != nil {
			return fmt.Errorf("sending spans: %w", err)
		}
	}
	if b.logs.LogRecordCount() > 0 {
		if _, err := o.logs.Export(ctx, plogotlp.NewExportRequestFromLogs(b.logs)); err != nil {
			return fmt.Errorf("sending log records: %w", err)
		}
	}
	return nil
}

// exporter is what send sends with.
type exporter interface {
	export(context.Context, *batch) error
}

// Each send holds at most batchRecords records of at most batchSpan of
// recorded time: as an agent's batch processor would send them.
const (
	batchRecords = 2000
	batchSpan    = 200 * time.Millisecond
)

type counts struct{ spans, logs int }

// maxGap is the longest recorded silence a paced replay waits out: the
// recordings have minutes without data between faults.
const maxGap = 10 * time.Second

// send replays records (in time order), their times moved by shift. At
// speed > 0, a batch leaves when the recorded time since the previous one
// (at most maxGap), divided by speed, has passed; at 0, as fast as the
// receiver takes them. A refused send stops the replay: the receiver's
// error is returned.
func send(ctx context.Context, out exporter, records []record, shift int64, speed float64) (counts, error) {
	var sent counts
	due, last := time.Now(), records[0].time
	for i := 0; i < len(records); {
		b := newBatch()
		from := records[i].time
		for ; i < len(records) && b.n < batchRecords && records[i].time-from < int64(batchSpan); i++ {
			b.add(&records[i], shift)
		}
		if speed > 0 {
			due = due.Add(time.Duration(float64(min(from-last, int64(maxGap))) / speed))
			last = from
			select {
			case <-ctx.Done():
				return sent, ctx.Err()
			case <-time.After(time.Until(due)):
			}
		}
		if err := out.export(ctx, b); err != nil {
			return sent, err
		}
		sent.spans += b.traces.SpanCount()
		sent.logs += b.logs.LogRecordCount()
	}
	return sent, nil
}
