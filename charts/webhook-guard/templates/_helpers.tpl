{{/* Chart name, truncated to the 63 characters of a label value. */}}
{{- define "webhook-guard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: the prefix of every object name. */}}
{{- define "webhook-guard.fullname" -}}
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

{{/* Selector labels: stable across upgrades. */}}
{{- define "webhook-guard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "webhook-guard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "webhook-guard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "webhook-guard.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: {{ .Values.shape }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "webhook-guard.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "webhook-guard.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "webhook-guard.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret holding the serving certificate. */}}
{{- define "webhook-guard.tlsSecretName" -}}
{{- if .Values.tls.existingSecret }}
{{- .Values.tls.existingSecret }}
{{- else }}
{{- printf "%s-tls" (include "webhook-guard.fullname" .) }}
{{- end }}
{{- end }}

{{/* The Service name (policy shape webhook DNS names and metrics). */}}
{{- define "webhook-guard.serviceName" -}}
{{- include "webhook-guard.fullname" . }}
{{- end }}

{{/*
The address the webhook server listens on: loopback on the node in the static
shape; the pod IP in the policy shape.
*/}}
{{- define "webhook-guard.webhookHost" -}}
{{- if eq .Values.shape "static" }}127.0.0.1{{ else }}$(POD_IP){{ end }}
{{- end }}

{{/* The host probes and the health server use. */}}
{{- define "webhook-guard.healthHost" -}}
{{- if eq .Values.shape "static" }}127.0.0.1{{ else }}$(POD_IP){{ end }}
{{- end }}

{{- define "webhook-guard.metricsHost" -}}
{{- default "$(POD_IP)" .Values.metrics.bindAddress }}
{{- end }}

{{/*
caReads returns, as YAML, the objects the guard may `get`, grouped by
namespace: {<namespace>: {secrets: [names], configMaps: [names]}}, with sorted,
de-duplicated names. Sources come from the mappings (ca.secret, ca.configMap)
and from extraSecretReads/extraConfigMapReads.
*/}}
{{- define "webhook-guard.caReads" -}}
{{- $secrets := dict }}
{{- $configMaps := dict }}
{{- range .Values.config.owners }}
{{- with .ca }}
{{- with .secret }}
{{- $_ := set $secrets .namespace (append (get $secrets .namespace | default list) .name) }}
{{- end }}
{{- with .configMap }}
{{- $_ := set $configMaps .namespace (append (get $configMaps .namespace | default list) .name) }}
{{- end }}
{{- end }}
{{- end }}
{{- range .Values.extraSecretReads }}
{{- $_ := set $secrets .namespace (append (get $secrets .namespace | default list) .name) }}
{{- end }}
{{- range .Values.extraConfigMapReads }}
{{- $_ := set $configMaps .namespace (append (get $configMaps .namespace | default list) .name) }}
{{- end }}
{{- $out := dict }}
{{- range $ns := concat (keys $secrets) (keys $configMaps) | uniq | sortAlpha }}
{{- $entry := dict }}
{{- with get $secrets $ns }}{{ $_ := set $entry "secrets" (uniq . | sortAlpha) }}{{ end }}
{{- with get $configMaps $ns }}{{ $_ := set $entry "configMaps" (uniq . | sortAlpha) }}{{ end }}
{{- $_ := set $out $ns $entry }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
The names the policy shape's generated objects may have (vap.PolicyNames for each
mapping, and vap.AnchorPolicyName), plus those of the generated objects
(label app.kubernetes.io/managed-by=webhook-guard) that exist at install or
upgrade time (lookup; empty under `helm template`), so that the objects of a
mapping removed by this upgrade may still be deleted. A YAML list, sorted.
*/}}
{{- define "webhook-guard.policyObjectNames" -}}
{{- $names := list (printf "webhook-guard.anchor.%s-policy-anchor" (include "webhook-guard.fullname" .)) }}
{{- range .Values.config.owners }}
{{- $base := printf "webhook-guard-%s" .name }}
{{- $names = concat $names (list $base (printf "%s-selected" $base) (printf "%s-ca" $base) (printf "%s-selected-ca" $base) (printf "%s-crds" $base) (printf "%s-crds-ca" $base) (printf "%s-apiservices" $base) (printf "%s-apiservices-ca" $base)) }}
{{- end }}
{{- range $kind := list "ValidatingAdmissionPolicy" "ValidatingAdmissionPolicyBinding" }}
{{- range (lookup "admissionregistration.k8s.io/v1" $kind "" "").items | default list }}
{{- if eq (get (.metadata.labels | default dict) "app.kubernetes.io/managed-by") "webhook-guard" }}
{{- $names = append $names .metadata.name }}
{{- end }}
{{- end }}
{{- end }}
{{- toYaml ($names | uniq | sortAlpha) }}
{{- end }}

{{/*
Mappings whose CA source resolves to a Secret only at run time; NOTES.txt
reminds the user to list those Secrets in extraSecretReads.
*/}}
{{- define "webhook-guard.indirectSources" -}}
{{- range .Values.config.owners }}
{{- if or .ca.certificate .ca.issuer (hasKey .ca "injectedByCertManager") }}
{{ .name }}
{{- end }}
{{- end }}
{{- end }}

{{/* Fail on contradictory values the schema cannot express. */}}
{{- define "webhook-guard.validate" -}}
{{- if and .Values.tls.existingSecret .Values.tls.issuerRef.name }}
{{- fail "tls.existingSecret and tls.issuerRef.name are both set: use your own Secret OR have your issuer sign the serving certificate, not both" }}
{{- end }}
{{- with .Values.policy.podDisruptionBudget }}
{{- if and (ne (toString .minAvailable) "") (ne (toString .maxUnavailable) "") }}
{{- fail (printf "policy.podDisruptionBudget: minAvailable (%v) and maxUnavailable (%v) are both set; a PodDisruptionBudget takes one: set the other to \"\"" .minAvailable .maxUnavailable) }}
{{- end }}
{{- end }}
{{- if and .Values.tls.approverPolicy.enabled .Values.tls.existingSecret }}
{{- fail "tls.approverPolicy.enabled and tls.existingSecret are both set: with your own Secret the chart requests no certificate, so there is nothing for approver-policy to approve; unset one" }}
{{- end }}
{{- if and .Values.config.existingConfigMap .Values.config.owners }}
{{- fail (printf "config.existingConfigMap is %q and config.owners is not empty: the guard reads only the existing ConfigMap, so these mappings would be ignored; move them into that ConfigMap's guard.yaml or unset config.existingConfigMap" .Values.config.existingConfigMap) }}
{{- end }}
{{- if and .Values.staticManifestSync.enabled (ne .Values.shape "static") }}
{{- fail "staticManifestSync.enabled requires shape: static (only the static shape runs on the control-plane nodes whose disk holds the static manifest)" }}
{{- end }}
{{- if and (eq .Values.shape "policy") (gt (int .Values.policy.replicas) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "policy.replicas is %d but leaderElection.enabled is false: the replicas' controllers would all act at once; enable leader election or run one replica" (int .Values.policy.replicas)) }}
{{- end }}
{{- if and .Values.monitoring.serviceMonitor.enabled (hasPrefix "127." .Values.metrics.bindAddress) }}
{{- fail "monitoring.serviceMonitor.enabled but metrics.bindAddress is loopback: Prometheus could not scrape it; leave metrics.bindAddress empty" }}
{{- end }}
{{- $owners := dict }}
{{- $claimed := dict }}
{{- range .Values.config.owners }}
{{- if hasKey $owners .name }}
{{- fail (printf "config.owners: two mappings are named %q; mapping names must be unique" .name) }}
{{- end }}
{{- $_ := set $owners .name true }}
{{- $owner := .name }}
{{- range $kind, $names := pick (.match | default dict) "validating" "mutating" }}
{{- range $names }}
{{- $key := printf "%s/%s" $kind . }}
{{- if hasKey $claimed $key }}
{{- fail (printf "config.owners: the %s webhook configuration %q is matched by mappings %q and %q; a configuration must have a single owner: remove it from one of them" $kind . (get $claimed $key) $owner) }}
{{- end }}
{{- $_ := set $claimed $key $owner }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/* commonAnnotations as a metadata.annotations block, or nothing. */}}
{{- define "webhook-guard.annotations" -}}
{{- with .Values.commonAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
{{- end }}
{{- end }}

{{/* The ConfigMap holding guard.yaml: the chart's own or config.existingConfigMap. */}}
{{- define "webhook-guard.configMapName" -}}
{{- default (printf "%s-config" (include "webhook-guard.fullname" .)) .Values.config.existingConfigMap }}
{{- end }}

{{/*
guard.yaml as the chart's ConfigMap holds it, without the final newline
the block scalar adds.
*/}}
{{- define "webhook-guard.guardYAML" -}}
apiVersion: webhook-guard.io/v1alpha1
kind: GuardConfig
{{ toYaml (omit .Values.config "existingConfigMap") }}
{{- end }}

{{/*
The fingerprint of guard.yaml as the guard's pods read it (the block
scalar's text, final newline included): what `webhook-guard render
static-manifest` computes from the mounted file (the first 128 bits of its
SHA-256, in hex).
*/}}
{{- define "webhook-guard.configFingerprint" -}}
{{- printf "%s\n" (include "webhook-guard.guardYAML" .) | sha256sum | trunc 32 }}
{{- end }}

{{/* Whether the static shape's skip grant is rendered. */}}
{{- define "webhook-guard.skipGrant" -}}
{{- if and (eq .Values.shape "static") .Values.static.skipAlwaysAllowed (not .Values.config.existingConfigMap) }}true{{ end }}
{{- end }}
