{{/*
The OTEL_* environment of a traced component (tracing.otlpEndpoint set), as EnvVar list
items. Takes (dict "root" $ "service" "cacheroute-gateway"). The pod's name and namespace
become resource attributes; $(POD_NAME) expands only when POD_NAME is defined earlier in
the same list (the gateway's is), so the operator's list defines them here first.
*/}}
{{- define "cacheroute.tracingEnv" -}}
{{- $t := .root.Values.tracing -}}
{{- if $t.otlpEndpoint }}
{{- if .podFields }}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: POD_NAMESPACE
  valueFrom:
    fieldRef:
      fieldPath: metadata.namespace
{{- end }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ $t.otlpEndpoint | quote }}
- name: OTEL_SERVICE_NAME
  value: {{ .service | quote }}
- name: OTEL_TRACES_SAMPLER
  value: parentbased_traceidratio
- name: OTEL_TRACES_SAMPLER_ARG
  value: {{ $t.sampleRatio | toString | quote }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: k8s.pod.name=$(POD_NAME),k8s.namespace.name=$(POD_NAMESPACE)
{{- end }}
{{- end }}
