{{/* Labels of every object of the chart. */}}
{{- define "portico.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "portico.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels selecting the controller's pods. */}}
{{- define "portico.selectorLabels" -}}
app.kubernetes.io/name: portico
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
