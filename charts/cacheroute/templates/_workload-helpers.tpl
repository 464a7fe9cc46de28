{{/*
Helpers of the operator and gateway workloads. The names live here, apart from
_helpers.tpl, and never repeat one of its names (Helm lets the last definition win).
*/}}

{{/* Selector labels of one component: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "cacheroute.component.selectorLabels" -}}
app.kubernetes.io/name: {{ include "cacheroute.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Labels of the gateway's objects. */}}
{{- define "cacheroute.gateway.labels" -}}
{{ include "cacheroute.labels" . }}
app.kubernetes.io/component: gateway
{{- end }}

{{/* The gateway's ServiceAccount name. */}}
{{- define "cacheroute.gateway.serviceAccountName" -}}
{{- if .Values.gateway.serviceAccount.create }}
{{- default (printf "%s-gateway" (include "cacheroute.fullname" .)) .Values.gateway.serviceAccount.name }}
{{- else }}
{{- required "gateway.serviceAccount.name is required when gateway.serviceAccount.create is false" .Values.gateway.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference from {repository, tag, digest}: the digest pins it; else tag, else appVersion. */}}
{{- define "cacheroute.component.image" -}}
{{- $img := .image }}
{{- if $img.digest }}
{{- printf "%s@%s" $img.repository $img.digest }}
{{- else }}
{{- printf "%s:%s" $img.repository (default .root.Chart.AppVersion $img.tag) }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget's budget: minAvailable when set, else maxUnavailable. */}}
{{- define "cacheroute.component.budget" -}}
{{- if not (kindIs "invalid" .minAvailable) }}
minAvailable: {{ .minAvailable }}
{{- else }}
maxUnavailable: {{ .maxUnavailable }}
{{- end }}
{{- end }}

{{/* Whether the cluster serves a Prometheus Operator kind (helm template: --api-versions). */}}
{{- define "cacheroute.monitoring.has" -}}
{{- if .root.Capabilities.APIVersions.Has (printf "monitoring.coreos.com/v1/%s" .kind) }}true{{ end }}
{{- end }}

{{/*
A NetworkPolicy peer as the operator's --runtime-ingress-* flags take it:
namespace=<ns>,<label>=<value>,... (labels in key order).
*/}}
{{- define "cacheroute.podPeer" -}}
namespace={{ .namespace }}{{ range $k, $v := .labels }},{{ $k }}={{ $v }}{{ end }}
{{- end }}

{{/* Value rules JSON Schema cannot state clearly; each failure says what to change. */}}
{{- define "cacheroute.validate" -}}
{{- if and .Values.monitoring.serviceMonitor.enabled .Values.monitoring.podMonitor.enabled }}
{{- fail "monitoring.serviceMonitor.enabled and monitoring.podMonitor.enabled are both true: each would scrape the same pods; enable one" }}
{{- end }}
{{- with .Values.operator.watchNamespace }}
{{- fail (printf "operator.watchNamespace was replaced by operator.watchNamespaces, a list (Roles in those namespaces instead of a ClusterRole): set operator.watchNamespaces={%s} and drop operator.watchNamespace" .) }}
{{- end }}
{{- $rnp := .Values.operator.runtimeNetworkPolicy }}
{{- if and $rnp.enabled (not .Values.gateway.enabled) (not $rnp.gateway.namespace) }}
{{- fail "operator.runtimeNetworkPolicy.enabled with gateway.enabled=false: set operator.runtimeNetworkPolicy.gateway.namespace and .podLabels to the gateway the SGLang pods must admit, or set operator.runtimeNetworkPolicy.enabled=false" }}
{{- end }}
{{- if and .Values.gateway.redis.url .Values.gateway.redis.existingSecret.name }}
{{- fail "gateway.redis.url and gateway.redis.existingSecret.name are both set: give the URL one way (a URL with a password belongs in the Secret)" }}
{{- end }}
{{- $redis := .Values.gateway.redis }}
{{- if or (regexMatch "^rediss?://[^/@?]*:[^/@?]*@" $redis.url) (contains "password=" $redis.url) }}
{{- fail "gateway.redis.url carries a password, which would sit in the pod spec and the gateway's command line: put the URL in a Secret and name it in gateway.redis.existingSecret.name (and .key)" }}
{{- end }}
{{- if and (or $redis.url $redis.existingSecret.name) (not $redis.reuseHmac.existingSecret.name) }}
{{- fail "gateway.redis needs gateway.redis.reuseHmac.existingSecret.name: a Secret whose key (gateway.redis.reuseHmac.existingSecret.key, default hmac-key) holds 32 or more random bytes that sign reuse entries, so a writer to Redis cannot plant answers; e.g. kubectl create secret generic cacheroute-reuse-hmac --from-literal=hmac-key=$(openssl rand -hex 32)" }}
{{- end }}
{{- end }}

{{/*
Labels of a component's pods: the selector labels, part-of and commonLabels. Not the
chart version: a chart release that changes no pod field must not roll the pods.
*/}}
{{- define "cacheroute.component.podLabels" -}}
{{ include "cacheroute.component.selectorLabels" . }}
app.kubernetes.io/part-of: cacheroute
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}
