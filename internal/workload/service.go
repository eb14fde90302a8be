package workload

import (
	"fmt"
	"math/rand/v2"
)

// Service is one running instance of a service: it becomes one OTel Resource.
type Service struct {
	Name     string // service.name
	Instance string // service.instance.id
	Host     string // host.name
	Version  string // service.version
	Language string // telemetry.sdk.language
	PID      int    // process.pid
}

// Model versions of scenario S1: the upgraded instance runs upgradedModel.
const (
	baseModel     = "llama3-8b-v2.3.1"
	upgradedModel = "llama3-8b-v2.3.2"
)

// Hosts of scenario S3: the overcommitted one has 8 celery workers and 1 GPU.
const (
	celeryBadHost  = "gpu-worker-1"
	celeryGoodHost = "gpu-worker-2"
)

// topology holds every service instance the workload can emit from.
type topology struct {
	all       []*Service
	gateway   []*Service
	auth      *Service
	preproc   []*Service
	analyzer  *Service
	model     []*Service // v2.3.1 engines, one per GPU node
	upgraded  *Service   // the engine on the last GPU node after its upgrade to v2.3.2
	postproc  *Service
	cache     *Service
	vector    *Service
	audit     *Service
	analytics *Service
	celeryBad *Service // celery@gpu-worker-1: concurrency 8, 1 GPU
	celeryOK  *Service // celery@gpu-worker-2: concurrency 8, 8 GPUs
}

func newTopology(rng *rand.Rand) *topology {
	t := &topology{}
	add := func(name, instance, host, version, lang string) *Service {
		s := &Service{Name: name, Instance: instance, Host: host, Version: version, Language: lang,
			PID: 1000 + rng.IntN(60000)}
		t.all = append(t.all, s)
		return s
	}
	for i := range 2 {
		t.gateway = append(t.gateway, add("gateway", fmt.Sprintf("gateway-%d", i), fmt.Sprintf("edge-%d", i), "1.14.2", "go"))
	}
	t.auth = add("auth", "auth-0", "edge-0", "0.9.3", "go")
	for i := range 2 {
		t.preproc = append(t.preproc, add("preproc", fmt.Sprintf("preproc-%d", i), fmt.Sprintf("cpu-node-%d", i), "2.4.0", "python"))
	}
	t.analyzer = add("code_syntax_analyzer", "code-syntax-analyzer-0", "cpu-node-0", "0.3.1", "python")
	for i := range 4 {
		t.model = append(t.model, add("model", fmt.Sprintf("model-%d", i), fmt.Sprintf("gpu-node-%d", i), baseModel, "python"))
	}
	t.upgraded = add("model", "model-3", "gpu-node-3", upgradedModel, "python")
	t.postproc = add("postproc", "postproc-0", "cpu-node-1", "1.6.0", "go")
	t.cache = add("cache", "cache-0", "cache-0", "7.2.4", "go")
	t.vector = add("vectorstore-writer", "vectorstore-writer-0", "worker-0", "0.8.2", "python")
	t.audit = add("audit-worker", "audit-worker-0", "worker-0", "0.4.0", "python")
	t.analytics = add("analytics-worker", "analytics-worker-0", "worker-1", "1.1.0", "python")
	t.celeryBad = add("celery-worker", "celery@"+celeryBadHost, celeryBadHost, "5.3.6", "python")
	t.celeryOK = add("celery-worker", "celery@"+celeryGoodHost, celeryGoodHost, "5.3.6", "python")
	return t
}
