{{/*
The pod template shared by the DaemonSet (static shape) and the Deployment
(policy shape).
*/}}
{{- define "webhook-guard.podTemplate" -}}
{{- $static := eq .Values.shape "static" -}}
metadata:
  labels:
    {{- include "webhook-guard.selectorLabels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # guard.yaml and the serving certificate are hot-reloaded: neither a
    # config change nor a certificate renewal restarts the pods.
    kubectl.kubernetes.io/default-container: webhook-guard
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "webhook-guard.serviceAccountName" . }}
  automountServiceAccountToken: true
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  {{- if $static }}
  # Listen on the node's loopback, where kube-apiserver calls the static webhook.
  hostNetwork: true
  dnsPolicy: ClusterFirstWithHostNet
  {{- end }}
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  {{- $nodeSelector := ternary .Values.static.nodeSelector .Values.policy.nodeSelector $static }}
  {{- with $nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- $tolerations := ternary .Values.static.tolerations .Values.policy.tolerations $static }}
  {{- with $tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- if .Values.affinity }}
  affinity:
    {{- toYaml .Values.affinity | nindent 4 }}
  {{- else if and (not $static) .Values.policy.podAntiAffinity }}
  affinity:
    podAntiAffinity:
      preferredDuringSchedulingIgnoredDuringExecution:
        - weight: 100
          podAffinityTerm:
            topologyKey: kubernetes.io/hostname
            labelSelector:
              matchLabels:
                {{- include "webhook-guard.selectorLabels" . | nindent 16 }}
  {{- end }}
  {{- with .Values.topologySpreadConstraints }}
  topologySpreadConstraints:
    {{- range . }}
    {{- $c := deepCopy . }}
    {{- if not (hasKey $c "labelSelector") }}
    {{- $_ := set $c "labelSelector" (dict "matchLabels" (include "webhook-guard.selectorLabels" $ | fromYaml)) }}
    {{- end }}
    - {{ toYaml $c | nindent 6 | trim }}
    {{- end }}
  {{- end }}
  containers:
    - name: webhook-guard
      image: {{ include "webhook-guard.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        - --config=/etc/webhook-guard/config/guard.yaml
        - --cert-dir=/etc/webhook-guard/tls
        - --bind-address={{ include "webhook-guard.webhookHost" . }}
        - --port={{ .Values.webhook.port }}
        # [host]:port works for IPv4 and IPv6 pod IPs alike.
        - --metrics-bind-address=[{{ include "webhook-guard.metricsHost" . }}]:{{ .Values.metrics.port }}
        - --health-probe-bind-address=[{{ include "webhook-guard.healthHost" . }}]:{{ .Values.health.port }}
        - --log-format={{ .Values.logging.format }}
        - --log-level={{ .Values.logging.level }}
        - --records-flush-interval={{ .Values.records.flushInterval }}
        - --records-max-results={{ .Values.records.maxResults }}
        {{- if .Values.leaderElection.enabled }}
        - --leader-elect
        - --leader-election-namespace={{ .Release.Namespace }}
        {{- end }}
        {{- if eq .Values.shape "policy" }}
        # Policy shape: the leader keeps the generated ValidatingAdmissionPolicies
        # and bindings in step.
        - --policy-mode
        # Every generated object is owned by this ClusterRole (policy-anchor.yaml):
        # helm uninstall deletes it and the garbage collector removes them.
        - --policy-anchor={{ include "webhook-guard.fullname" . }}-policy-anchor
        # Only break-glass may delete the anchor (policy.anchorProtection).
        - --policy-anchor-protection={{ .Values.policy.anchorProtection }}
        {{- else if .Values.policyGuardServiceAccount }}
        # Writes of that policy-shape release's generated policies and bindings
        # reach this static guard; only its service account may make them.
        - --policy-guard-service-account={{ .Values.policyGuardServiceAccount }}
        {{- end }}
        {{- with .Values.extraArgs }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      env:
        - name: POD_IP
          valueFrom:
            fieldRef:
              fieldPath: status.podIP
        {{- with .Values.goRuntime.gogc }}
        - name: GOGC
          value: {{ . | quote }}
        {{- end }}
        {{- if and .Values.goRuntime.memoryLimitFromResources (dig "limits" "memory" "" .Values.resources) }}
        - name: GOMEMLIMIT
          valueFrom:
            resourceFieldRef:
              containerName: webhook-guard
              resource: limits.memory
        {{- end }}
        {{- with .Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        {{- if $static }}
        # The policy shape serves no admission endpoint: kube-apiserver
        # evaluates the generated policies itself.
        - name: webhook
          containerPort: {{ .Values.webhook.port }}
          protocol: TCP
        {{- end }}
        - name: metrics
          containerPort: {{ .Values.metrics.port }}
          protocol: TCP
        - name: health
          containerPort: {{ .Values.health.port }}
          protocol: TCP
      livenessProbe:
        httpGet:
          {{- if $static }}
          # With host networking an httpGet probe goes to the pod (= node) IP unless
          # told otherwise; the health server listens on loopback only.
          host: 127.0.0.1
          {{- end }}
          path: /healthz
          port: health
          scheme: HTTP
        initialDelaySeconds: 5
        periodSeconds: 10
        timeoutSeconds: 2
        failureThreshold: 3
      readinessProbe:
        httpGet:
          {{- if $static }}
          host: 127.0.0.1
          {{- end }}
          path: /readyz
          port: health
          scheme: HTTP
        periodSeconds: 5
        timeoutSeconds: 2
        failureThreshold: 3
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/webhook-guard/config
          readOnly: true
        - name: tls
          mountPath: /etc/webhook-guard/tls
          readOnly: true
        {{- with .Values.volumeMounts }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    {{- if .Values.staticManifestSync.enabled }}
    # Keeps <hostPath>/static/webhook-guard.static.k8s.io.yaml current with the
    # guard's CA; see staticManifestSync in values.yaml for what this risks.
    - name: static-manifest-sync
      image: {{ include "webhook-guard.image" . }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - render
        - static-manifest
        - --url=https://127.0.0.1:{{ .Values.webhook.port }}/validate
        - --ca-file=/etc/webhook-guard/tls/ca.crt
        - --config=/etc/webhook-guard/config/guard.yaml
        - --failure-policy={{ .Values.webhook.failurePolicy }}
        - --timeout-seconds={{ .Values.webhook.timeoutSeconds }}
        - --output-dir=/var/run/webhook-guard/host
        - --static-manifests-dir={{ trimSuffix "/" .Values.staticManifestSync.hostPath }}/static
        {{- with .Values.policyGuardServiceAccount }}
        - --guard-service-account={{ . }}
        {{- end }}
        {{- if include "webhook-guard.skipGrant" . }}
        - --skip-grant-service-account={{ .Release.Namespace }}/{{ include "webhook-guard.serviceAccountName" . }}
        {{- end }}
        - --watch
      resources:
        {{- toYaml .Values.staticManifestSync.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: config
          mountPath: /etc/webhook-guard/config
          readOnly: true
        - name: tls
          mountPath: /etc/webhook-guard/tls
          readOnly: true
        - name: static-manifests
          mountPath: /var/run/webhook-guard/host
    {{- end }}
  volumes:
    - name: config
      configMap:
        name: {{ include "webhook-guard.configMapName" . }}
    - name: tls
      secret:
        secretName: {{ include "webhook-guard.tlsSecretName" . }}
        items:
          - key: tls.crt
            path: tls.crt
          - key: tls.key
            path: tls.key
          - key: ca.crt
            path: ca.crt
    {{- if .Values.staticManifestSync.enabled }}
    - name: static-manifests
      hostPath:
        path: {{ .Values.staticManifestSync.hostPath }}
        # Must exist (created by the operator with the right owner): a directory
        # kubelet created would be root-owned and unwritable for the sidecar.
        type: Directory
    {{- end }}
    {{- with .Values.volumes }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end }}
