{{/* The release's name for its objects: the release name, with the
chart's name added unless it is already in it. */}}
{{- define "conclave.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "conclave.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "conclave.labels" -}}
{{ include "conclave.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The Secret the tokens come from. */}}
{{- define "conclave.secretName" -}}
{{- default (include "conclave.fullname" .) .Values.secret.existingSecret -}}
{{- end -}}

{{/* Where git-sync publishes the checkout (its --root and --link), and
the templates directory conclave reads through that link. */}}
{{- define "conclave.gitRoot" -}}/git{{- end -}}
{{- define "conclave.gitLink" -}}repo{{- end -}}
{{- define "conclave.templatesDir" -}}
{{- $dir := printf "%s/%s" (include "conclave.gitRoot" .) (include "conclave.gitLink" .) -}}
{{- with trimAll "/" .Values.gitSync.subPath -}}{{ $dir }}/{{ . }}{{- else -}}{{ $dir }}{{- end -}}
{{- end -}}

{{/* The same restrictions for every container. */}}
{{- define "conclave.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
