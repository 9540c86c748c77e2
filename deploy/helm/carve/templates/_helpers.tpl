{{/* Common labels. */}}
{{- define "carve.labels" -}}
app.kubernetes.io/name: carve
app.kubernetes.io/part-of: carve
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* An image reference: (dict "root" $ "image" V), V a value with repository, tag and digest; imageRegistry replaces the repository's registry and path. A digest (make release sets them) pins the image: repository@digest, the tag left out. */}}
{{- define "carve.image" -}}
{{- $reg := .root.Values.imageRegistry | default "" | trimSuffix "/" -}}
{{- $repo := .image.repository -}}
{{- if $reg -}}{{- $repo = printf "%s/%s" $reg (base .image.repository) -}}{{- end -}}
{{- if .image.digest -}}
{{- if not (regexMatch "^sha256:[0-9a-f]{64}$" (toString .image.digest)) -}}
{{- fail (printf "image digest %q of %s: want sha256: and 64 hex digits" (toString .image.digest) .image.repository) -}}
{{- end -}}
{{ printf "%s@%s" $repo .image.digest }}
{{- else -}}
{{ printf "%s:%s" $repo (toString .image.tag) }}
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

{{/*
The name of one of the release's cluster-scoped objects that users never
name themselves (ClusterRoles, ClusterRoleBindings, the node
ValidatingAdmissionPolicy and its binding): (list $ "controller") gives
carve-controller for the release "carve", the kustomize base's names, and
RELEASE-carve-controller for any other release. So two releases never
share one: the second's would take over the first's, and its uninstall
would delete them. No other release's name can give the same string: the
part after RELEASE-carve- never holds "carve". The names users do name
stay as set in the values (StorageClasses, snapshot classes), and the
CSIDriver is the driver's name, lvm.carve.dev.
*/}}
{{- define "carve.clusterName" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- if eq $root.Release.Name "carve" -}}
{{ printf "carve-%s" $name }}
{{- else -}}
{{ printf "%s-carve-%s" $root.Release.Name $name }}
{{- end -}}
{{- end -}}

{{/* --logging-format, validated: text or json. */}}
{{- define "carve.logFormat" -}}
{{- if not (has .Values.logFormat (list "text" "json")) -}}
{{- fail (printf "logFormat %q: text or json" (toString .Values.logFormat)) -}}
{{- end -}}
{{- .Values.logFormat -}}
{{- end -}}
