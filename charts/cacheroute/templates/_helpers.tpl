{{/* The chart name, or nameOverride. */}}
{{- define "cacheroute.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of object names: fullnameOverride, else <release>-<name>, or the release
name alone when it already contains the chart name. 63 characters at most (DNS label).
*/}}
{{- define "cacheroute.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "cacheroute.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "cacheroute.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: cacheroute
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Labels of the operator's objects. */}}
{{- define "cacheroute.operator.labels" -}}
{{ include "cacheroute.labels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The operator's ServiceAccount name. */}}
{{- define "cacheroute.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (printf "%s-operator" (include "cacheroute.fullname" .)) .Values.operator.serviceAccount.name }}
{{- else }}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{- /*
Whether the gateway serves as a Gateway API Inference Extension endpoint picker (gateway.mode
picker or both): the picker Service, its flags, and the operator's InferencePools.
*/}}
{{- define "cacheroute.picker.enabled" -}}
{{- if and .Values.gateway.enabled (has .Values.gateway.mode (list "picker" "both")) }}true{{- end }}
{{- end }}

{{/*
The one Secret the operator keeps for the gateway (ADR 0027): the Tenants' key digests and the
runtimes' API keys, in the release namespace. The gateway reads it by name and no other Secret.
*/}}
{{- define "cacheroute.gatewayKeysSecret" -}}
{{- printf "%s-gateway-keys" (include "cacheroute.fullname" .) -}}
{{- end }}
