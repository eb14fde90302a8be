package workload

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploggrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of every generated record.
const ScopeName = "github.com/loom-otel/loom/internal/workload"

// emitter turns modelled requests into SDK spans and log records. Each
// service instance gets its own TracerProvider and LoggerProvider (its own
// Resource), created on first use for each *Service; all of them feed one
// batcher and one exporter per signal. It is used from one goroutine.
type emitter struct {
	ids       *presetIDs
	spans     *batcher[sdktrace.ReadOnlySpan]
	logs      *batcher[sdklog.Record]
	providers map[*Service]providers

	shutProviders []func(context.Context) error
	shutExporters []func(context.Context) error
}

// providers are the tracer and logger of one service instance.
type providers struct {
	tracer trace.Tracer
	logger log.Logger
}

// newEmitter returns an emitter for requests from about services service instances.
func newEmitter(ctx context.Context, target Target, services int) (*emitter, error) {
	spanExp, logExp, err := newExporters(ctx, target)
	if err != nil {
		return nil, err
	}
	return &emitter{
		ids:       &presetIDs{},
		spans:     newBatcher(spanExp.ExportSpans),
		logs:      newBatcher(logExp.Export),
		providers: make(map[*Service]providers, services),

		shutExporters: []func(context.Context) error{spanExp.Shutdown, logExp.Shutdown},
	}, nil
}

func newExporters(ctx context.Context, t Target) (sdktrace.SpanExporter, sdklog.Exporter, error) {
	var (
		spans sdktrace.SpanExporter
		logs  sdklog.Exporter
		err   error
	)
	switch t.Protocol {
	case GRPC:
		topts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(t.Endpoint), otlptracegrpc.WithHeaders(t.Headers)}
		lopts := []otlploggrpc.Option{otlploggrpc.WithEndpoint(t.Endpoint), otlploggrpc.WithHeaders(t.Headers)}
		if t.Insecure {
			topts = append(topts, otlptracegrpc.WithInsecure())
			lopts = append(lopts, otlploggrpc.WithInsecure())
		}
		if spans, err = otlptracegrpc.New(ctx, topts...); err == nil {
			logs, err = otlploggrpc.New(ctx, lopts...)
		}
	case HTTP:
		topts := []otlptracehttp.Option{otlptracehttp.WithEndpoint(t.Endpoint), otlptracehttp.WithHeaders(t.Headers)}
		lopts := []otlploghttp.Option{otlploghttp.WithEndpoint(t.Endpoint), otlploghttp.WithHeaders(t.Headers)}
		if t.Insecure {
			topts = append(topts, otlptracehttp.WithInsecure())
			lopts = append(lopts, otlploghttp.WithInsecure())
		}
		if spans, err = otlptracehttp.New(ctx, topts...); err == nil {
			logs, err = otlploghttp.New(ctx, lopts...)
		}
	default:
		err = fmt.Errorf("workload: unknown protocol %q", t.Protocol)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("workload: OTLP/%s exporter for %s: %w", t.Protocol, t.Endpoint, err)
	}
	return spans, logs, nil
}

// presetIDs makes the SDK use the ids the model chose, so trace and span ids
// are as reproducible as the rest of the request; the emitter sets next just
// before each Start.
type presetIDs struct{ next trace.SpanContext }

func (p *presetIDs) NewIDs(context.Context) (trace.TraceID, trace.SpanID) {
	return p.next.TraceID(), p.next.SpanID()
}

func (p *presetIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return p.next.SpanID() }

func (e *emitter) providersOf(s *Service) providers {
	p, ok := e.providers[s]
	if !ok {
		res := resource.NewWithAttributes(semconv.SchemaURL,
			semconv.ServiceName(s.Name), semconv.ServiceInstanceID(s.Instance), semconv.ServiceVersion(s.Version),
			semconv.HostName(s.Host), semconv.ProcessPID(s.PID), semconv.TelemetrySDKLanguageKey.String(s.Language))
		tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithIDGenerator(e.ids),
			sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(spanSink{e.spans}))
		// Our records never repeat a key, so the SDK's per-record dedup is skipped.
		lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(logSink{e.logs}),
			sdklog.WithAllowKeyDuplication())
		p = providers{tracer: tp.Tracer(ScopeName), logger: lp.Logger(ScopeName)}
		e.providers[s] = p
		e.shutProviders = append(e.shutProviders, tp.Shutdown, lp.Shutdown)
	}
	return p
}

func (e *emitter) emit(r *Request) {
	for i := range r.Spans {
		e.span(&r.Spans[i])
	}
	for i := range r.Logs {
		e.log(&r.Logs[i])
	}
}

func (e *emitter) span(s *Span) {
	tracer := e.providersOf(s.Service).tracer
	ctx := context.Background()
	if s.Parent.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, s.Parent)
	}
	e.ids.next = s.Context
	links := make([]trace.Link, len(s.Links))
	for i, l := range s.Links {
		links[i] = trace.Link{SpanContext: l}
	}
	_, span := tracer.Start(ctx, s.Name, trace.WithTimestamp(s.Start), trace.WithSpanKind(s.Kind), trace.WithAttributes(s.Attrs...),
		trace.WithLinks(links...))
	if s.Error != "" {
		span.SetStatus(codes.Error, s.Error)
	}
	for _, ev := range s.Events {
		span.AddEvent(ev.Name, trace.WithTimestamp(ev.Time), trace.WithAttributes(ev.Attrs...))
	}
	span.End(trace.WithTimestamp(s.End))
}

func (e *emitter) log(l *Log) {
	logger := e.providersOf(l.Service).logger
	ctx := context.Background()
	if l.Context.IsValid() {
		ctx = trace.ContextWithSpanContext(ctx, l.Context)
	}
	var r log.Record
	r.SetTimestamp(l.Time)
	r.SetSeverity(l.Severity)
	r.SetSeverityText(l.SeverityText)
	r.SetBody(attribute.StringValue(l.Body))
	r.AddAttributes(l.Attrs...)
	logger.Emit(ctx, r)
}

// failed reports whether an export has failed; close returns the error.
func (e *emitter) failed() bool { return e.spans.firstErr() != nil || e.logs.firstErr() != nil }

// close shuts the providers down, exports everything and shuts the exporters down.
func (e *emitter) close(ctx context.Context) error {
	var errs []error
	for _, shut := range e.shutProviders {
		errs = append(errs, shut(ctx))
	}
	errs = append(errs, e.spans.close(), e.logs.close())
	for _, shut := range e.shutExporters {
		errs = append(errs, shut(ctx))
	}
	return errors.Join(errs...)
}
