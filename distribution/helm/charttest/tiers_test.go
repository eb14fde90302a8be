package charttest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// install renders one scenario and decodes it.
func install(t *testing.T, valuesFiles ...string) *objects {
	t.Helper()
	manifest, err := render(valuesFiles...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, manifest)
}

// tier is a rendered workload with its container and parsed collector config.
type tier struct {
	workload
	container corev1.Container
	config    map[string]any
}

func (o *objects) tier(t *testing.T, kind, name string) tier {
	t.Helper()
	for _, w := range o.workloads() {
		if w.kind != kind || w.name != name {
			continue
		}
		text, err := o.configOf(w)
		if err != nil {
			t.Fatal(err)
		}
		var config map[string]any
		if err := yaml.Unmarshal([]byte(text), &config); err != nil {
			t.Fatalf("%s %s: its collector config is not YAML: %v", kind, name, err)
		}
		return tier{workload: w, container: w.pod.Spec.Containers[0], config: config}
	}
	t.Fatalf("no %s %s rendered", kind, name)
	return tier{}
}

// at returns the value at a path of map keys in a parsed config, or nil.
func at(node any, keys ...string) any {
	for _, key := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return nil
		}
		node = m[key]
	}
	return node
}

func stringList(node any) []string {
	var out []string
	list, _ := node.([]any)
	for _, v := range list {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

var envReference = regexp.MustCompile(`\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}`)

// resolved is a config string with its ${env:NAME:-default} references
// replaced by the container's literal env values or the defaults.
func (tr tier) resolved(value any) string {
	env := map[string]string{}
	for _, e := range tr.container.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return envReference.ReplaceAllStringFunc(fmt.Sprint(value), func(ref string) string {
		m := envReference.FindStringSubmatch(ref)
		if v, ok := env[m[1]]; ok {
			return v
		}
		return m[2]
	})
}

func (tr tier) mountPath(volume string) string {
	for _, m := range tr.container.VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	return ""
}

func (tr tier) envFrom(name string) *corev1.EnvVarSource {
	for _, e := range tr.container.Env {
		if e.Name == name {
			return e.ValueFrom
		}
	}
	return nil
}

func (tr tier) port(name string) (corev1.ContainerPort, bool) {
	for _, p := range tr.container.Ports {
		if p.Name == name {
			return p, true
		}
	}
	return corev1.ContainerPort{}, false
}

// TestDefaultsMakeTheTwoTiers checks, on the default values, what
// ARCHITECTURE.md §4 and the gpu receiver's README ask of each tier.
func TestDefaultsMakeTheTwoTiers(t *testing.T) {
	objs := install(t)
	agent := objs.tier(t, "DaemonSet", "loom-agent")
	gateway := objs.tier(t, "StatefulSet", "loom-gateway")

	t.Run("agent privileges", func(t *testing.T) {
		spec := agent.pod.Spec
		sc := agent.container.SecurityContext
		if !spec.HostPID {
			t.Error("the agent needs hostPID (NVML's per-process memory names host pids)")
		}
		if sc == nil || sc.Privileged != nil && *sc.Privileged {
			t.Fatal("the agent must not be privileged")
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Add, "BPF") || !slices.Contains(sc.Capabilities.Add, "PERFMON") || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("the agent's capabilities are %+v, want ALL dropped and BPF, PERFMON added", sc.Capabilities)
		}
		if agent.mountPath("tracefs") != "/sys/kernel/tracing" || agent.mountPath("debugfs") != "/sys/kernel/debug" {
			t.Error("tracefs and debugfs are not mounted where the tracer looks")
		}
		if spec.RuntimeClassName == nil || *spec.RuntimeClassName != "nvidia" {
			t.Error("the agent does not run under the NVIDIA runtime class, which gives it /dev/nvidia* and libnvidia-ml")
		}
		if spec.NodeSelector["nvidia.com/gpu.present"] != "true" || len(spec.Tolerations) == 0 {
			t.Errorf("the agent is not placed on GPU nodes: nodeSelector %v, tolerations %v", spec.NodeSelector, spec.Tolerations)
		}
	})

	t.Run("GPU metrics labelled by GPU", func(t *testing.T) {
		if at(agent.config, "exporters", "prometheus", "resource_to_telemetry_conversion", "enabled") != true {
			t.Error("the prometheus exporter drops the GPUs' resource attributes: two GPUs of a node would write one series")
		}
	})

	t.Run("agent identity from the downward API", func(t *testing.T) {
		for name, field := range map[string]string{"K8S_NODE_NAME": "spec.nodeName", "K8S_POD_UID": "metadata.uid"} {
			from := agent.envFrom(name)
			if from == nil || from.FieldRef == nil || from.FieldRef.FieldPath != field {
				t.Errorf("%s does not come from %s", name, field)
			}
		}
		if got := agent.resolved(at(agent.config, "receivers", "gpu", "host_name")); got != "$(K8S_NODE_NAME)" {
			t.Errorf("the gpu receiver's host_name resolves to %q, want the node name", got)
		}
	})

	t.Run("agents route by req_id to the gateways", func(t *testing.T) {
		lb := at(agent.config, "exporters", "load_balancing")
		if at(lb, "routing_key") != "attributes" || !slices.Equal(stringList(at(lb, "routing_attributes")), []string{"req_id"}) {
			t.Errorf("load_balancing does not route by the req_id attribute: %v", lb)
		}
		headless, ok := objs.services["loom-gateway-headless"]
		if !ok || headless.Spec.ClusterIP != corev1.ClusterIPNone {
			t.Fatal("no headless Service for the gateways")
		}
		if got, want := at(lb, "resolver", "k8s", "service"), headless.Name+"."+namespace; got != want {
			t.Errorf("the k8s resolver watches %v, want %s", got, want)
		}
		if at(lb, "resolver", "dns") != nil {
			t.Error("the dns resolver is left next to the k8s one (the exporter takes only one)")
		}
		otlp, _ := gateway.port("otlp")
		if got := stringList(at(lb, "resolver", "k8s", "ports")); !slices.Equal(got, []string{fmt.Sprint(otlp.ContainerPort)}) {
			t.Errorf("the resolver sends to ports %v, the gateways listen on %d", got, otlp.ContainerPort)
		}
		if !watchesEndpointSlicesOnly(objs.roles["loom-agent"]) {
			t.Errorf("the agents' Role does not let the resolver list and watch EndpointSlices, and only that: %+v", objs.roles["loom-agent"])
		}
		if !*agent.pod.Spec.AutomountServiceAccountToken {
			t.Error("the k8s resolver needs the service account token")
		}
		if sts := objs.statefulSets["loom-gateway"]; sts.Spec.ServiceName != headless.Name {
			t.Errorf("the StatefulSet's serviceName is %s, not the headless Service", sts.Spec.ServiceName)
		}
	})

	t.Run("agent keeps a batch on disk until a gateway has it", func(t *testing.T) {
		lb := at(agent.config, "exporters", "load_balancing")
		if at(lb, "sending_queue", "storage") != "file_storage/agent" {
			t.Errorf("the load_balancing queue is not on file_storage/agent: %v", at(lb, "sending_queue"))
		}
		// A gateway's own exporter with a queue or retries of its own holds
		// batches in memory, off the persistent queue: a crash loses them.
		for _, setting := range []string{"sending_queue", "retry_on_failure"} {
			if at(lb, "protocol", "otlp", setting, "enabled") != false {
				t.Errorf("protocol::otlp::%s is not turned off: %v", setting, at(lb, "protocol", "otlp", setting))
			}
		}
		if at(lb, "retry_on_failure", "enabled") != true {
			t.Errorf("a batch a gateway refused is dropped from the persistent queue instead of retried: retry_on_failure %v", at(lb, "retry_on_failure"))
		}
	})

	t.Run("gateway queues and state on a volume per replica", func(t *testing.T) {
		dir := gateway.resolved(at(gateway.config, "extensions", "file_storage/queues", "directory"))
		if len(gateway.claims) != 1 || gateway.mountPath(gateway.claims[0].Name) != dir {
			t.Errorf("file_storage writes %s; the volume claim template is mounted at %q", dir, gateway.mountPath("storage"))
		}
		for _, exporter := range []string{"loki", "tempo", "eventgraph"} {
			if at(gateway.config, "exporters", exporter, "sending_queue", "storage") != "file_storage/queues" {
				t.Errorf("the %s exporter's queue is not on file_storage/queues", exporter)
			}
		}
	})

	t.Run("gateway writes the event graph", func(t *testing.T) {
		for _, pipeline := range []string{"logs", "traces"} {
			if !slices.Contains(stringList(at(gateway.config, "service", "pipelines", pipeline, "exporters")), "eventgraph") {
				t.Errorf("the gateway's %s pipeline does not export to eventgraph", pipeline)
			}
		}
		if at(gateway.config, "exporters", "eventgraph", "backend") != "neo4j" {
			t.Errorf("the default event graph backend is %v, want neo4j", at(gateway.config, "exporters", "eventgraph", "backend"))
		}
	})

	t.Run("gateway drains", func(t *testing.T) {
		if _, ok := objs.pdbs["loom-gateway"]; !ok {
			t.Error("no PodDisruptionBudget for the gateways")
		}
		wait, err := time.ParseDuration(fmt.Sprint(at(gateway.config, "processors", "reqsampling", "decision_wait")))
		if err != nil {
			t.Fatal(err)
		}
		grace := time.Duration(*gateway.pod.Spec.TerminationGracePeriodSeconds) * time.Second
		if grace < 2*wait {
			t.Errorf("terminationGracePeriodSeconds %s leaves too little time after decision_wait %s to decide and drain", grace, wait)
		}
	})

	t.Run("rca page off the Services", func(t *testing.T) {
		if endpoint := fmt.Sprint(at(gateway.config, "extensions", "rca", "endpoint")); endpoint != "127.0.0.1:4320" {
			t.Errorf("the rca page listens on %s by default, want the pod's loopback", endpoint)
		}
		for name, svc := range objs.services {
			for _, p := range svc.Spec.Ports {
				if p.Name == "rca" || p.Port == 4320 {
					t.Errorf("Service %s carries the rca page", name)
				}
			}
		}
	})

	t.Run("gateways share what they learn", func(t *testing.T) {
		share := at(gateway.config, "processors", "reqsampling", "share")
		port, ok := gateway.port("share")
		if !ok {
			t.Fatal("the gateway container declares no share port")
		}
		if endpoint := gateway.resolved(at(share, "server", "endpoint")); endpoint != fmt.Sprintf("0.0.0.0:%d", port.ContainerPort) {
			t.Errorf("share::server::endpoint is %q, want the share port on the pod network", endpoint)
		}
		headless := objs.services[objs.statefulSets["loom-gateway"].Spec.ServiceName]
		if !slices.ContainsFunc(headless.Spec.Ports, func(p corev1.ServicePort) bool {
			return p.Name == "share" && p.Port == port.ContainerPort
		}) {
			t.Error("the headless Service does not carry the share port")
		}
		dns := gateway.resolved(at(share, "dns"))
		if want := fmt.Sprintf("http://%s.%s.svc:%d", headless.Name, headless.Namespace, port.ContainerPort); dns != want {
			t.Errorf("share::dns is %q, want %q: the headless Service, which resolves to every replica", dns, want)
		}
	})

	t.Run("gateway unprivileged", func(t *testing.T) {
		sc := gateway.container.SecurityContext
		if sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("the gateway should run as non-root on a read-only root filesystem: %+v", sc)
		}
	})

	t.Run("gateway hands requests over", func(t *testing.T) {
		handover := at(gateway.config, "processors", "reqsampling", "handover")
		headless := objs.services[objs.statefulSets["loom-gateway"].Spec.ServiceName]
		otlp, _ := gateway.port("otlp")
		if from := gateway.envFrom("K8S_POD_IP"); from == nil || from.FieldRef == nil || from.FieldRef.FieldPath != "status.podIP" {
			t.Error("K8S_POD_IP does not come from status.podIP")
		}
		if self := gateway.resolved(fmt.Sprint(at(handover, "self"))); self != fmt.Sprintf("$(K8S_POD_IP):%d", otlp.ContainerPort) {
			t.Errorf("handover::self is %q, want the pod's IP and OTLP port, as the agents' resolver names it", self)
		}
		if service := gateway.resolved(fmt.Sprint(at(handover, "resolver", "k8s", "service"))); service != headless.Name+"."+headless.Namespace {
			t.Errorf("the hand-over follows %q, not the headless Service the agents follow", service)
		}
		if !watchesEndpointSlicesOnly(objs.roles["loom-gateway"]) || !*gateway.pod.Spec.AutomountServiceAccountToken {
			t.Errorf("the hand-over's resolver needs a Role on EndpointSlices, and only that, and the token: %+v", objs.roles["loom-gateway"])
		}
	})
}

// watchesEndpointSlicesOnly says whether role lets a k8s resolver list and
// watch EndpointSlices, and nothing else.
func watchesEndpointSlicesOnly(role *rbacv1.Role) bool {
	return role != nil && len(role.Rules) == 1 && slices.Equal(role.Rules[0].Resources, []string{"endpointslices"}) &&
		slices.Contains(role.Rules[0].Verbs, "watch") && slices.Contains(role.Rules[0].Verbs, "list") &&
		!slices.ContainsFunc(role.Rules[0].Verbs, func(v string) bool { return v != "get" && v != "list" && v != "watch" })
}

// TestSecureExampleWiresTLSAndToken checks examples/secure.yaml: the files
// the gateways' TLS and token settings name are where their Secrets are
// mounted, the agents verify the gateways with the CA alone and present the token.
func TestSecureExampleWiresTLSAndToken(t *testing.T) {
	objs := install(t, examplesDir+"/secure.yaml")
	agent := objs.tier(t, "DaemonSet", "loom-agent")
	gateway := objs.tier(t, "StatefulSet", "loom-gateway")

	grpc := at(gateway.config, "receivers", "otlp", "protocols", "grpc")
	for _, key := range []string{"cert_file", "key_file"} {
		file := fmt.Sprint(at(grpc, "tls", key))
		if !strings.HasPrefix(file, gateway.mountPath("tls")+"/") {
			t.Errorf("tls.%s is %s, outside the TLS Secret's mount %s", key, file, gateway.mountPath("tls"))
		}
	}
	authenticator := fmt.Sprint(at(grpc, "auth", "authenticator"))
	tokenFile := fmt.Sprint(at(gateway.config, "extensions", authenticator, "filename"))
	if !strings.HasPrefix(tokenFile, gateway.mountPath("auth")+"/") || !slices.Contains(stringList(at(gateway.config, "service", "extensions")), authenticator) {
		t.Errorf("the OTLP receiver's authenticator %s is not enabled or reads %s outside the token's mount", authenticator, tokenFile)
	}

	otlp := at(agent.config, "exporters", "load_balancing", "protocol", "otlp")
	if at(otlp, "tls", "insecure") != false || !strings.HasPrefix(fmt.Sprint(at(otlp, "tls", "ca_file")), agent.mountPath("gateway-ca")+"/") {
		t.Errorf("the agents do not verify the gateways against the mounted CA: %v", at(otlp, "tls"))
	}
	if want := "loom-gateway-headless.observability.svc"; at(otlp, "tls", "server_name_override") != want {
		t.Errorf("the agents verify the name %v, want %s", at(otlp, "tls", "server_name_override"), want)
	}
	for _, vol := range agent.pod.Spec.Volumes {
		if vol.Name == "gateway-ca" && (vol.Secret == nil || len(vol.Secret.Items) != 1 || vol.Secret.Items[0].Key != "ca.crt") {
			t.Errorf("the agents mount more of the gateways' TLS Secret than ca.crt: %+v", vol.Secret)
		}
	}
	clientAuth := fmt.Sprint(at(otlp, "auth", "authenticator"))
	if !strings.HasPrefix(fmt.Sprint(at(agent.config, "extensions", clientAuth, "filename")), agent.mountPath("gateway-auth")+"/") ||
		!slices.Contains(stringList(at(agent.config, "service", "extensions")), clientAuth) {
		t.Errorf("the agents do not present the mounted token (authenticator %q)", clientAuth)
	}
	if from := gateway.envFrom("LOOM_NEO4J_PASSWORD"); from == nil || from.SecretKeyRef == nil || from.SecretKeyRef.Name != "neo4j-auth" {
		t.Error("the Neo4j password does not come from its Secret")
	}
	if at(gateway.config, "exporters", "tempo", "tls", "insecure") != false {
		t.Error("backends.tempo.insecure: false does not reach the tempo exporter")
	}
}

// TestConfigValuesMergeOverTheBuiltInConfigs checks examples/small-cluster.yaml:
// `config` changes one key and keeps its siblings, null removes a key, and a
// disabled backend leaves the config and its pipeline.
func TestConfigValuesMergeOverTheBuiltInConfigs(t *testing.T) {
	objs := install(t, examplesDir+"/small-cluster.yaml")
	agent := objs.tier(t, "DaemonSet", "loom-agent")
	gateway := objs.tier(t, "StatefulSet", "loom-gateway")

	if got := at(gateway.config, "processors", "reqsampling", "decision_wait"); fmt.Sprint(got) != "10s" {
		t.Errorf("reqsampling.decision_wait = %v, want the value's 10s", got)
	}
	if at(gateway.config, "processors", "reqsampling", "policies") == nil || at(gateway.config, "processors", "reqsampling", "storage") == nil {
		t.Error("setting reqsampling.decision_wait removed its siblings policies and storage")
	}
	protocols := at(agent.config, "receivers", "otlp", "protocols")
	if at(protocols, "http") != nil || at(protocols, "grpc") == nil {
		t.Errorf("http: null should remove OTLP/HTTP and keep gRPC: %v", protocols)
	}
	if _, ok := agent.port("otlp-http"); ok {
		t.Error("ports.otlp-http.enabled: false left the container port")
	}
	if at(gateway.config, "exporters", "loki") != nil || slices.Contains(stringList(at(gateway.config, "service", "pipelines", "logs", "exporters")), "loki") {
		t.Error("backends.loki.enabled: false left the loki exporter in the config")
	}
	if len(gateway.claims) != 0 {
		t.Error("persistence.enabled: false still claims a volume")
	}
	if fmt.Sprint(at(gateway.config, "processors", "reqsampling", "base_percentage")) != "10" {
		t.Errorf("sampling.basePercentage did not reach reqsampling: %v", at(gateway.config, "processors", "reqsampling"))
	}
	if len(at(gateway.config, "processors", "reqsampling", "policies").([]any)) == 0 {
		t.Error("the sampling values replaced reqsampling's policies")
	}
}

// TestEmbeddedGraphExampleKeepsTheGraphOnTheVolume checks
// examples/embedded-graph.yaml: the graph file is on the replica's volume and
// the agents find the gateways by DNS without a Role.
func TestEmbeddedGraphExampleKeepsTheGraphOnTheVolume(t *testing.T) {
	objs := install(t, examplesDir+"/embedded-graph.yaml")
	agent := objs.tier(t, "DaemonSet", "loom-agent")
	gateway := objs.tier(t, "StatefulSet", "loom-gateway")

	graph := at(gateway.config, "exporters", "eventgraph")
	if at(graph, "backend") != "embedded" || at(graph, "neo4j") != nil {
		t.Errorf("the event graph is not the embedded store alone: %v", graph)
	}
	if path := fmt.Sprint(at(graph, "embedded", "path")); !strings.HasPrefix(path, gateway.mountPath("storage")+"/") {
		t.Errorf("the embedded graph %s is not on the replica's volume %s", path, gateway.mountPath("storage"))
	}
	resolver := at(agent.config, "exporters", "load_balancing", "resolver")
	if at(resolver, "k8s") != nil || agent.resolved(at(resolver, "dns", "hostname")) != "loom-gateway-headless.observability.svc" {
		t.Errorf("the agents do not resolve the headless Service by DNS: %v", resolver)
	}
	if _, ok := objs.roles["loom-agent"]; ok || *agent.pod.Spec.AutomountServiceAccountToken {
		t.Error("the agents' dns resolver needs no Role and no API token")
	}
}

// gateway.rca.enabled: false takes the rca extension out of the gateway's
// built-in config, not only off its list.
func TestRCAPageCanBeTurnedOff(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("gateway:\n  rca:\n    enabled: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gateway := install(t, values).tier(t, "StatefulSet", "loom-gateway")
	if at(gateway.config, "extensions", "rca") != nil {
		t.Error("the rca extension is still configured")
	}
	for _, ext := range at(gateway.config, "service", "extensions").([]any) {
		if ext == "rca" {
			t.Error("the rca extension is still on the service's list")
		}
	}
	for _, p := range gateway.container.Ports {
		if p.Name == "rca" {
			t.Error("the gateway container still declares the rca port")
		}
	}
}

// gateway.share.enabled: false leaves reqsampling's share:: off: no endpoint,
// no peers, no port.
func TestSharingCanBeTurnedOff(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("gateway:\n  share:\n    enabled: false\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs := install(t, values)
	gateway := objs.tier(t, "StatefulSet", "loom-gateway")
	share := at(gateway.config, "processors", "reqsampling", "share")
	if endpoint, dns := gateway.resolved(at(share, "server", "endpoint")), gateway.resolved(at(share, "dns")); endpoint != "" || dns != "" {
		t.Errorf("sharing is still on: share::server::endpoint %q, share::dns %q", endpoint, dns)
	}
	if _, ok := gateway.port("share"); ok {
		t.Error("the gateway container still declares the share port")
	}
	for _, p := range objs.services["loom-gateway-headless"].Spec.Ports {
		if p.Name == "share" {
			t.Error("the headless Service still carries the share port")
		}
	}
}
