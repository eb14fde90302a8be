{{/*
The collector configs. Each tier's is built in four layers:
  1. files/<tier>.yaml, the repository's distribution/<tier>.yaml (make generate copies it);
  2. what running in a pod changes in it (loom.podChanges below);
  3. what this chart's values change in it (loom.<tier>Changes below);
  4. the tier's `config` value.
Each layer is deep-merged over the one before: maps merge key by key, any other
value (lists included) replaces, and null removes the key.
*/}}

{{/* loom.merge (dict "base" map "over" map) prints the merged map as JSON. */}}
{{- define "loom.merge" -}}
{{- $out := deepCopy (default (dict) .base) -}}
{{- range $key, $value := .over -}}
{{- if kindIs "invalid" $value -}}
{{- $_ := unset $out $key -}}
{{- else if kindIs "map" $value -}}
{{- $below := get $out $key -}}
{{- $_ := set $out $key (include "loom.merge" (dict "base" (ternary $below (dict) (kindIs "map" $below)) "over" $value) | fromJson) -}}
{{- else -}}
{{- $_ := set $out $key $value -}}
{{- end -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/* loom.parsed (dict "text" string "what" name) prints YAML text as JSON, or fails naming it. */}}
{{- define "loom.parsed" -}}
{{- $parsed := fromYaml .text -}}
{{- if hasKey $parsed "Error" -}}
{{- fail (printf "%s is not valid YAML: %s" .what (get $parsed "Error")) -}}
{{- end -}}
{{- toJson $parsed -}}
{{- end -}}

{{/* loom.config (dict "root" $ "tier" "agent") prints a tier's collector config. */}}
{{- define "loom.config" -}}
{{- $file := printf "files/%s.yaml" .tier -}}
{{- $base := include "loom.parsed" (dict "text" (.root.Files.Get $file) "what" $file) | fromJson -}}
{{- $pod := include "loom.parsed" (dict "text" (include "loom.podChanges" .) "what" "the chart's pod changes") | fromJson -}}
{{- $config := include "loom.merge" (dict "base" $base "over" $pod) | fromJson -}}
{{- $changes := include (printf "loom.%sChanges" .tier) (dict "root" .root "base" $config) -}}
{{- $changes = include "loom.parsed" (dict "text" $changes "what" (printf "the chart's changes to %s" $file)) | fromJson -}}
{{- $config = include "loom.merge" (dict "base" $config "over" $changes) | fromJson -}}
{{- $config = include "loom.merge" (dict "base" $config "over" (index .root.Values .tier).config) | fromJson -}}
{{- toYaml $config -}}
{{- end -}}

{{/* In a pod, memory_limiter works from the container's memory limit (the
cgroup's, `resources.limits.memory`), not from the bare-host sizes that
distribution/<tier>.yaml ships. */}}
{{- define "loom.podChanges" -}}
processors:
  memory_limiter:
    limit_mib: null
    spike_limit_mib: null
    limit_percentage: 80
    spike_limit_percentage: 20
{{- end -}}

{{/* Resource attributes of the collector's own telemetry, from the downward API. */}}
{{- define "loom.telemetryResource" -}}
telemetry:
  resource:
    service.instance.id: ${env:K8S_POD_UID}
    k8s.pod.name: ${env:K8S_POD_NAME}
    k8s.namespace.name: ${env:K8S_NAMESPACE}
    k8s.node.name: ${env:K8S_NODE_NAME}
{{- end -}}

{{- define "loom.gatewayServerName" -}}
{{- default (printf "%s.%s.svc" (include "loom.gatewayHeadless" .) .Release.Namespace) .Values.gateway.tls.serverName -}}
{{- end -}}

{{/* What the values change in distribution/agent.yaml. */}}
{{- define "loom.agentChanges" -}}
{{- $v := .root.Values -}}
{{- $extensions := get .base.service "extensions" -}}
{{- if $v.gateway.auth.enabled -}}
{{- $extensions = append $extensions "bearertokenauth/gateway" -}}
{{- end -}}
receivers:
  gpu:
    nvml:
      enabled: {{ $v.gpu.nvml.enabled }}
    ioctl:
      enabled: {{ $v.gpu.ioctl.enabled }}
      slow_threshold: {{ $v.gpu.ioctl.slowThreshold }}
{{- if $v.gateway.auth.enabled }}
extensions:
  bearertokenauth/gateway:
    filename: /etc/loom/gateway-auth/{{ $v.gateway.auth.key }}
{{- end }}
exporters:
  load_balancing:
    {{- if $v.gateway.tls.enabled }}
    protocol:
      otlp:
        tls:
          insecure: false
          ca_file: /etc/loom/gateway-ca/ca.crt
          server_name_override: {{ include "loom.gatewayServerName" .root }}
        {{- if $v.gateway.auth.enabled }}
        auth:
          authenticator: bearertokenauth/gateway
        {{- end }}
    {{- end }}
    resolver:
      {{- if eq $v.agent.resolver "k8s" }}
      dns: null
      k8s:
        service: {{ include "loom.gatewayHeadless" .root }}.{{ .root.Release.Namespace }}
        ports: [{{ $v.gateway.ports.otlp.containerPort }}]
      {{- else }}
      dns:
        port: {{ $v.gateway.ports.otlp.containerPort | quote }}
      {{- end }}
service:
  extensions: {{ toJson $extensions }}
  {{- include "loom.telemetryResource" . | nindent 2 }}
{{- end -}}

{{/* What the values change in distribution/gateway.yaml. */}}
{{- define "loom.gatewayChanges" -}}
{{- $v := .root.Values -}}
{{- $extensions := get .base.service "extensions" -}}
{{- if $v.gateway.auth.enabled -}}
{{- $extensions = append $extensions "bearertokenauth/agents" -}}
{{- end -}}
{{- if not $v.gateway.rca.enabled -}}
{{- $extensions = without $extensions "rca" -}}
{{- end -}}
{{- $logs := get (get .base.service.pipelines "logs") "exporters" -}}
{{- $traces := get (get .base.service.pipelines "traces") "exporters" -}}
{{- if not $v.backends.loki.enabled -}}
{{- $logs = without $logs "loki" -}}
{{- end -}}
{{- if not $v.backends.tempo.enabled -}}
{{- $traces = without $traces "tempo" -}}
{{- end -}}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 0.0.0.0:{{ $v.gateway.ports.otlp.containerPort }}
        {{- if $v.gateway.tls.enabled }}
        tls:
          cert_file: /etc/loom/tls/tls.crt
          key_file: /etc/loom/tls/tls.key
        {{- end }}
        {{- if $v.gateway.auth.enabled }}
        auth:
          authenticator: bearertokenauth/agents
        {{- end }}
extensions:
  {{- if $v.gateway.auth.enabled }}
  bearertokenauth/agents:
    filename: /etc/loom/auth/{{ $v.gateway.auth.key }}
  {{- end }}
  {{- if $v.gateway.rca.enabled }}
  rca:
    endpoint: {{ ternary "0.0.0.0" "127.0.0.1" $v.gateway.rca.service.enabled }}:{{ $v.gateway.rca.port }}
  {{- else }}
  rca: null
  {{- end }}
processors:
  reqsampling:
    base_percentage: {{ $v.sampling.basePercentage }}
    decision_wait: {{ $v.sampling.decisionWait }}
    {{- if $v.gateway.tls.enabled }}
    # A replica hands requests to another as the agents send them: over TLS,
    # with the agents' token.
    handover:
      client:
        tls:
          insecure: false
          ca_file: /etc/loom/tls/ca.crt
          server_name_override: {{ include "loom.gatewayServerName" .root }}
        {{- if $v.gateway.auth.enabled }}
        auth:
          authenticator: bearertokenauth/agents
        {{- end }}
    {{- end }}
exporters:
  {{- if $v.backends.loki.enabled }}
  loki:
    endpoint: {{ $v.backends.loki.endpoint }}
  {{- else }}
  loki: null
  {{- end }}
  {{- if $v.backends.tempo.enabled }}
  tempo:
    endpoint: {{ $v.backends.tempo.endpoint }}
    tls:
      insecure: {{ $v.backends.tempo.insecure }}
  {{- else }}
  tempo: null
  {{- end }}
  eventgraph:
    backend: {{ $v.backends.eventgraph.backend }}
    {{- if eq $v.backends.eventgraph.backend "neo4j" }}
    neo4j:
      uri: {{ $v.backends.eventgraph.neo4j.uri }}
      username: {{ $v.backends.eventgraph.neo4j.username }}
      {{- with $v.backends.eventgraph.neo4j.database }}
      database: {{ . }}
      {{- end }}
    embedded: null
    {{- else }}
    neo4j: null
    embedded:
      path: /var/lib/otelcol-loom/gateway/loom-graph.db
      retention:
        max_age: {{ $v.backends.eventgraph.embedded.maxAge }}
        max_bytes: {{ int64 $v.backends.eventgraph.embedded.maxBytes }}
    {{- end }}
service:
  extensions: {{ toJson $extensions }}
  pipelines:
    logs:
      exporters: {{ toJson $logs }}
    traces:
      exporters: {{ toJson $traces }}
  {{- include "loom.telemetryResource" . | nindent 2 }}
{{- end -}}
