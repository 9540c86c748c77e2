{{/* Common labels. */}}
{{- define "carve.labels" -}}
app.kubernetes.io/name: carve
app.kubernetes.io/part-of: carve
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference: (dict "root" $ "repository" R "tag" T); imageRegistry replaces R's registry and path. */}}
{{- define "carve.image" -}}
{{- $reg := .root.Values.imageRegistry | default "" | trimSuffix "/" -}}
{{- if $reg -}}
{{ printf "%s/%s:%s" $reg (base .repository) (toString .tag) }}
{{- else -}}
{{ printf "%s:%s" .repository (toString .tag) }}
{{- end -}}
{{- end -}}

{{/* --volume-groups, validated: at least one. */}}
{{- define "carve.volumeGroups" -}}
{{- if not .Values.volumeGroups -}}
{{- fail "volumeGroups: name at least one volume group" -}}
{{- end -}}
{{- join "," .Values.volumeGroups -}}
{{- end -}}

{{/* Restricted container security context of the controller pod. */}}
{{- define "carve.restricted" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end -}}
