package foundry

import (
	"fmt"
	"math/rand/v2"

	"github.com/loom-otel/loom/internal/workload"
)

// Services of the platform (service.name).
const (
	svcEdge   = "frontdoor"    // API edge, Go, log/slog JSON
	svcRouter = "switchyard"   // router and prompt templating, Go, log/slog text on stdout
	svcTok    = "lexd"         // tokenizer with a worker thread pool, Python logging
	svcRAG    = "vecfind"      // embedding and retrieval, logfmt with lvl=
	svcText   = "kilnserve"    // text model engines, structlog JSON on stdout, tracebacks on stderr
	svcImage  = "lumenpix"     // image model engines, Python logging
	svcGuard  = "aegis-guard"  // moderation and answer judging, Java, log4j lines on stdout
	svcStore  = "respstore"    // result store, Go, plain text
	svcWriter = "quill-writer" // async result writer, Python, plain text on stdout
	svcBiller = "tollbooth"    // async usage metering, Java, log4j lines on stdout
)

// Models: the name a client asks for (gen_ai.request.model at the edge) and
// the versions the engines serve.
const (
	mixtralAsked  = "mixtral-8x7b"
	mixtralServed = "mixtral-8x7b-instruct-v0.1"
	phiAsked      = "phi-3-mini"
	phiServed     = "phi3-mini-128k-v3.1"
	phiUpgraded   = "phi3-mini-128k-v3.2" // FieldDrop: no longer writes resp.segment_map
	imageAsked    = "sdxl-turbo"
	imageServed   = "sdxl-turbo-v1.0"
	engineVersion = "0.9.4"
)

// lexdPoolWorkers is the size of each tokenizer replica's thread pool.
const lexdPoolWorkers = 16

// engine is one model-serving replica, bound to one GPU.
type engine struct {
	svc   *workload.Service
	model string // the model version it serves
	asked string // the name clients ask for
	gpu   string // accel.uuid of its GPU
	card  int    // CUDA device index on its host
}

// topology holds every service instance of the platform.
type topology struct {
	all    []*workload.Service
	edge   []*workload.Service
	router *workload.Service
	tok    []*workload.Service // tok[1] runs dry in TokPool
	rag    *workload.Service
	// mixtral[3] runs out of memory in GPUOOM, mixtral[4] thrashes in KVThrash.
	mixtral []*engine
	// phi[1] is replaced by upgraded, a new instance on the same GPU, at FieldDrop's onset.
	phi      []*engine
	upgraded *engine
	image    []*engine
	guard    *workload.Service
	store    *workload.Service
	writer   *workload.Service
	biller   *workload.Service
}

func newTopology(rng *rand.Rand) *topology {
	t := &topology{}
	add := func(name, instance, host, version, lang string) *workload.Service {
		s := &workload.Service{Name: name, Instance: instance, Host: host, Version: version, Language: lang, PID: 2 + rng.IntN(32000)}
		t.all = append(t.all, s)
		return s
	}
	gpu := func() string {
		return fmt.Sprintf("GPU-%08x-%04x-%04x-%04x-%012x", rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
	newEngine := func(name, instance, host, model, asked string, card int) *engine {
		return &engine{svc: add(name, instance, host, engineVersion, "python"), model: model, asked: asked, gpu: gpu(), card: card}
	}
	for i, host := range []string{"ingress-a", "ingress-b"} {
		t.edge = append(t.edge, add(svcEdge, fmt.Sprintf("frontdoor-%d", i), host, "3.2.0", "go"))
	}
	t.router = add(svcRouter, "switchyard-0", "ctl-1", "1.8.1", "go")
	for i := range 3 {
		t.tok = append(t.tok, add(svcTok, fmt.Sprintf("lexd-%d", i), fmt.Sprintf("cpu-c%d", i+1), "0.14.2", "python"))
	}
	t.rag = add(svcRAG, "vecfind-0", "cpu-c2", "2.0.3", "rust")
	// Two cards per DGX host; the thrashing replica shares dgx-d with an image engine.
	for i, at := range []struct {
		host string
		card int
	}{{"dgx-a", 0}, {"dgx-a", 1}, {"dgx-b", 0}, {"dgx-b", 1}, {"dgx-d", 0}} {
		t.mixtral = append(t.mixtral, newEngine(svcText, fmt.Sprintf("kilnserve-%d", i), at.host, mixtralServed, mixtralAsked, at.card))
	}
	t.phi = append(t.phi, newEngine(svcText, "kilnserve-5", "dgx-c", phiServed, phiAsked, 0),
		newEngine(svcText, "kilnserve-6", "dgx-c", phiServed, phiAsked, 1))
	old := t.phi[1]
	t.upgraded = &engine{svc: add(svcText, "kilnserve-6-r2", old.svc.Host, engineVersion, "python"), model: phiUpgraded, asked: phiAsked, gpu: old.gpu, card: old.card}
	t.image = append(t.image, newEngine(svcImage, "lumenpix-0", "dgx-e", imageServed, imageAsked, 0),
		newEngine(svcImage, "lumenpix-1", "dgx-d", imageServed, imageAsked, 1))
	t.guard = add(svcGuard, "aegis-guard-0", "cpu-c4", "5.1.0", "java")
	t.store = add(svcStore, "respstore-0", "store-1", "1.3.7", "go")
	t.writer = add(svcWriter, "quill-writer-0", "worker-q1", "0.7.0", "python")
	t.biller = add(svcBiller, "tollbooth-0", "worker-t1", "2.4.1", "java")
	return t
}
