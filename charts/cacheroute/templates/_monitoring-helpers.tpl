{{/*
Helpers of the Prometheus Operator objects (monitoring*.yaml). Names here never repeat one of
_helpers.tpl's or _workload-helpers.tpl's (Helm lets the last definition win).
*/}}

{{/*
"true" when monitoring is on: a ServiceMonitor or PodMonitor scrapes the operator and the gateway.
The alerts and the SGLang PodMonitor come with it; the operator admits Prometheus to the SGLang pods
on the same condition (operator-deployment.yaml, --runtime-ingress-metrics).
*/}}
{{- define "cacheroute.monitoring.on" -}}
{{- if or .Values.monitoring.serviceMonitor.enabled .Values.monitoring.podMonitor.enabled }}true{{ end }}
{{- end }}

{{/*
A fixed job name, whatever the release or object is called: the alerts (monitoring/alerts.yaml)
select by it the series whose names other software shares (controller_runtime_*, workqueue_*,
leader_election_master_status, sglang:*). The relabeling runs after the Prometheus Operator's own
job label, so it wins.
*/}}
{{- define "cacheroute.monitoring.jobLabel" -}}
- targetLabel: job
  replacement: cacheroute-{{ . }}
{{- end }}
