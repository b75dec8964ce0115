{{/* The chart name, overridable. */}}
{{- define "maya.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name resources carry: the release name, with the chart name unless the release already holds it. */}}
{{- define "maya.fullname" -}}
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

{{/* A derived name: the full name, shortened so the suffix fits in 63 characters. */}}
{{- define "maya.suffixed" -}}
{{- $root := index . 0 }}{{- $suffix := index . 1 }}
{{- printf "%s-%s" (include "maya.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-") $suffix }}
{{- end }}

{{- define "maya.selectorLabels" -}}
app.kubernetes.io/name: {{ include "maya.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "maya.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "maya.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: maya
{{- end }}

{{- define "maya.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "maya.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: name an existing ServiceAccount when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "maya.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "maya.emulationImage" -}}
{{- printf "%s:%s" .Values.emulation.image.repository (default .Chart.AppVersion .Values.emulation.image.tag) }}
{{- end }}

{{- define "maya.webhookService" -}}
{{- include "maya.suffixed" (list . "webhook") }}
{{- end }}

{{- define "maya.webhookSecret" -}}
{{- include "maya.suffixed" (list . "webhook-tls") }}
{{- end }}

{{- define "maya.peeringName" -}}
{{- default (include "maya.fullname" .) .Values.peering.name }}
{{- end }}

{{/* Settings that a schema cannot check, with what to do about them. */}}
{{- define "maya.checks" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.peering.enabled) }}
{{- fail (printf "replicas is %d but peering.enabled is false: replicas would plan the same TrainingPlans at once; set peering.enabled=true (needs kopf's peering CRD) or replicas=1" (int .Values.replicas)) }}
{{- end }}
{{- $ports := list (int .Values.metrics.port) 8081 }}
{{- if .Values.webhook.enabled }}{{ $ports = append $ports (int .Values.webhook.port) }}{{ end }}
{{- if ne (len $ports) (len (uniq $ports)) }}
{{- fail (printf "metrics.port (%d), webhook.port (%d) and the liveness port 8081 must differ" (int .Values.metrics.port) (int .Values.webhook.port)) }}
{{- end }}
{{- end }}
