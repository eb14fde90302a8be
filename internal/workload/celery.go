package workload

import (
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-otel/loom/internal/golden"
)

const (
	// celeryShare is the share of healthy traffic that is celery batch tasks
	// (on the healthy worker host) when S3 is selected.
	celeryShare = 0.2
	// celeryTimeLimit is the hard time limit after which S3 tasks are killed.
	celeryTimeLimit = 300 * time.Second
	celeryTask      = "tasks.batch_inference"
)

const workerLostTraceback = `Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/billiard/pool.py", line 1265, in mark_as_worker_lost
    raise WorkerLostError(
billiard.exceptions.WorkerLostError: Worker exited prematurely: signal 9 (SIGKILL) Job: `

// celeryRequest models a batch task run by a celery worker. On the
// overcommitted host (S3) the task never reaches model/forward: CUDA contexts
// are rebuilt, the pool process dies and the task hits its time limit.
func (g *Generator) celeryRequest(end time.Time, failing bool) *Request {
	rng := g.rng
	p := g.prompts[rng.IntN(len(g.prompts))]
	worker := g.topo.celeryOK
	sc := Healthy
	if failing {
		worker, sc = g.topo.celeryBad, S3
	}
	pid := int64(1000 + rng.IntN(60000)) // the pool process that runs the task
	startDur := ms(g.uniform(3, 8))
	var fwd forward
	var total time.Duration
	cpu := g.normal(35, 8, 5, 80)
	if failing {
		cpu = g.normal(99, 0.6, 97, 100)
		total = celeryTimeLimit + ms(g.uniform(5, 20))
	} else {
		fwd = g.forward(Healthy, p)
		total = startDur + fwd.latency + ms(g.uniform(5, 20))
	}
	b := g.newBuild(end.Add(-total), total, "req-celery-"+g.uuid(), sc)
	id := b.reqID
	b.r.Truth.InputHash, b.r.Truth.Host = p.hash, worker.Host
	if !failing {
		b.r.Truth.ModelVer = baseModel // the model the task loads; a failing task never gets that far
	}
	l := &g.line

	b.log(worker, 0, pyInfo, trace.SpanContext{}, l.reset().text("Task ").text(celeryTask).text("[").text(id).text("] received").String())
	rootAttrs := []attribute.KeyValue{
		attribute.String("celery.task_name", celeryTask),
		attribute.Float64(golden.CPUPercent, round1(cpu)), latency(total),
	}
	if failing {
		rootAttrs = append(rootAttrs, attribute.Int(golden.GPUMemMb, 0))
	}
	root := b.span(worker, "run/"+celeryTask, "celery/task", trace.SpanKindConsumer, trace.SpanContext{}, 0, total, rootAttrs...)
	taskStart := b.span(worker, "celery/task_start", "celery/task_start", trace.SpanKindInternal, root, hop, hop+startDur,
		attribute.Int64("celery.worker_pid", pid), attribute.Float64(golden.CPUPercent, round1(cpu)))
	gpuMem := fwd.gpuMemMb // zero when failing: the task never gets the GPU
	l.reset().text("{").jsonStr("level", "INFO").jsonStr("logger", "tasks.batch").jsonStr("msg", "task start").
		jsonStr(golden.Stage, "celery/task_start").jsonStr(golden.ReqID, id).jsonStr(golden.InputHash, p.hash)
	if !failing {
		l.jsonStr("model", baseModel)
	}
	b.log(worker, hop+startDur, pyInfo, taskStart, l.jsonInt("worker_pid", pid).jsonInt("concurrency", 8).
		jsonFloat("cpu_percent", cpu, 1).jsonInt("gpu_mem_mb", gpuMem).text("}").String())

	if !failing {
		fwdAt := hop + startDur
		b.span(worker, "model/forward", "model/forward", trace.SpanKindInternal, root, fwdAt, fwdAt+fwd.latency, fwd.attrs(baseModel)...)
		b.log(worker, total, pyInfo, trace.SpanContext{}, l.reset().text("Task ").text(celeryTask).text("[").text(id).
			text("] succeeded in ").float(total.Seconds(), 2).text("s: None").String())
		return b.r
	}

	b.r.Spans[0].Error = "TimeLimitExceeded(300)" // the task span
	// CUDA contexts are rebuilt over the first 60% of the time limit, then
	// the pool process dies and the task waits for the hard limit.
	rebuilds := 2 + rng.IntN(3)
	for i := range rebuilds {
		at := hop + startDur + time.Duration(i)*(celeryTimeLimit*6/10/time.Duration(rebuilds))
		dur := ms(g.uniform(1500, 4000))
		cuda := b.span(worker, "cuda/context_init", "cuda/context_init", trace.SpanKindInternal, root, at, at+dur,
			attribute.Int(golden.GPUMemMb, 0), attribute.Float64(golden.CPUPercent, round1(g.normal(99, 0.6, 97, 100))))
		b.log(worker, at+dur, pyWarn, cuda, l.reset().text("[").text(id).text("] CUDA context lost on device 0, rebuilding (attempt ").
			int(int64(i+1)).text(")").String())
	}
	died := ms(g.uniform(0.65, 0.9) * float64(celeryTimeLimit/time.Millisecond))
	b.log(worker, died, pyError, trace.SpanContext{}, l.reset().text("Pool process pid ").int(pid).text(" died unexpectedly while running ").
		text(celeryTask).text("[").text(id).text("]\n").text(workerLostTraceback).int(int64(rng.IntN(64))).text(".").String())
	b.log(worker, celeryTimeLimit, pyError, trace.SpanContext{}, l.reset().text("Hard time limit (300s) exceeded for ").text(celeryTask).
		text("[").text(id).text("]").String())
	if rng.Float64() < 0.5 {
		b.log(worker, ms(g.uniform(0, float64(celeryTimeLimit/time.Millisecond))), pyWarn, trace.SpanContext{},
			"missed heartbeat from celery@"+celeryGoodHost)
	}
	return b.r
}
