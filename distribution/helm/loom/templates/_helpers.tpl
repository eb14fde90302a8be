{{/* Names, labels and the image, shared by both tiers. */}}

{{- define "loom.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "loom.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The name of a tier's objects: loom.tierName (dict "root" $ "tier" "agent"). */}}
{{- define "loom.tierName" -}}
{{- printf "%s-%s" (include "loom.fullname" .root | trunc 52 | trimSuffix "-") .tier -}}
{{- end -}}

{{- define "loom.gatewayHeadless" -}}
{{- printf "%s-headless" (include "loom.tierName" (dict "root" . "tier" "gateway")) -}}
{{- end -}}

{{- define "loom.selectorLabels" -}}
app.kubernetes.io/name: {{ include "loom.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .tier }}
{{- end -}}

{{- define "loom.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "loom.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: loom
{{- end -}}

{{- define "loom.serviceAccountName" -}}
{{- $sa := (index .root.Values .tier).serviceAccount -}}
{{- if $sa.create -}}
{{- default (include "loom.tierName" .) $sa.name -}}
{{- else -}}
{{- default "default" $sa.name -}}
{{- end -}}
{{- end -}}

{{- define "loom.image" -}}
{{- $image := .Values.image -}}
{{- if $image.digest -}}
{{- printf "%s@%s" $image.repository $image.digest -}}
{{- else -}}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The container ports of a tier, from its ports.<name>: loom.containerPorts (dict "ports" ...).
*/}}
{{- define "loom.containerPorts" -}}
{{- range $name, $port := .ports }}
{{- if $port.enabled }}
- name: {{ $name }}
  containerPort: {{ $port.containerPort }}
  protocol: TCP
  {{- if $port.hostPort }}
  hostPort: {{ $port.hostPort }}
  {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{- define "loom.servicePorts" -}}
{{- range $name, $port := .ports }}
{{- if $port.enabled }}
- name: {{ $name }}
  port: {{ $port.servicePort }}
  targetPort: {{ $name }}
  protocol: TCP
{{- end }}
{{- end }}
{{- end -}}

{{/* The health_check extension's port, which the probes ask. */}}
{{- define "loom.probes" -}}
livenessProbe:
  httpGet:
    path: /
    port: 13133
  periodSeconds: 10
  failureThreshold: 6
readinessProbe:
  httpGet:
    path: /
    port: 13133
  periodSeconds: 5
{{- end -}}

{{/* The pod's identity, for the collector's own telemetry (loom.telemetryResource). */}}
{{- define "loom.downwardEnv" -}}
- name: K8S_NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: K8S_POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: K8S_POD_UID
  valueFrom:
    fieldRef:
      fieldPath: metadata.uid
- name: K8S_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end -}}

{{/* The rules between values that the schema cannot say, each naming the key and the fix. */}}
{{- define "loom.validate" -}}
{{- $gateway := .Values.gateway -}}
{{- if and $gateway.tls.enabled (not $gateway.tls.secretName) -}}
{{- fail "gateway.tls.secretName: empty; name the kubernetes.io/tls Secret (tls.crt, tls.key, ca.crt) of the gateways' certificate, or set gateway.tls.enabled: false" -}}
{{- end -}}
{{- if and $gateway.auth.enabled (not $gateway.auth.secretName) -}}
{{- fail "gateway.auth.secretName: empty; name the Secret that holds the agents' bearer token, or set gateway.auth.enabled: false" -}}
{{- end -}}
{{- if and $gateway.auth.enabled (not $gateway.tls.enabled) -}}
{{- fail "gateway.auth.enabled: the bearer token needs gateway.tls.enabled: true (gRPC never sends a token in plaintext)" -}}
{{- end -}}
{{- if and (not .Values.agent.enabled) (not $gateway.enabled) -}}
{{- fail "agent.enabled and gateway.enabled are both false: nothing to install" -}}
{{- end -}}
{{- end -}}
