{{/* Names, labels, the image and the per-component environment. */}}

{{- define "herald.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "herald.fullname" -}}
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

{{/* The name of a component's objects: (dict "root" $ "component" "worker"). */}}
{{- define "herald.componentName" -}}
{{- printf "%s-%s" (include "herald.fullname" .root | trunc 50 | trimSuffix "-") .component }}
{{- end }}

{{- define "herald.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object: (dict "root" $ "component" "worker"); component may be empty. */}}
{{- define "herald.labels" -}}
helm.sh/chart: {{ include "herald.chart" .root }}
{{ include "herald.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: herald
{{- with .root.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "herald.selectorLabels" -}}
app.kubernetes.io/name: {{ include "herald.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
{{- if .component }}
app.kubernetes.io/component: {{ .component }}
{{- end }}
{{- end }}

{{- define "herald.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
Settings each subcommand binds, by their flag names in internal/config (and cmd/herald/*.go): the chart
passes a component exactly these, as HERALD_* variables. Keep in step with the wiring; the chart test
checks every variable against `herald <subcommand> -h`.
*/}}
{{- define "herald.settings" -}}
operator: [database-url, metrics-addr, messenger-api-url, public-url, bot-token-key, log-level, log-format]
ingress: [database-url, kafka-brokers, kafka-topic-prefix, http-addr, metrics-addr, shutdown-delay, trusted-proxies, behind-proxy, messenger-bot-username, deep-link-base, callback-secret-key, callback-allow-insecure, callback-allow-private, log-level, log-format]
webhook: [database-url, kafka-brokers, kafka-topic-prefix, http-addr, metrics-addr, shutdown-delay, webhook-secret, phone-hash-key, dev-admins, messenger-api-url, messenger-bot-token, bot-token-key, log-level, log-format]
worker: [database-url, kafka-brokers, kafka-topic-prefix, http-addr, metrics-addr, messenger-api-url, messenger-bot-token, bot-token-key, messenger-rate-limit, messenger-per-chat-interval, worker-group-id, worker-max-attempts, worker-concurrency, worker-lease, retention-body-days, retention-notification-days, retention-expired, retention-callback-days, log-level, log-format]
callbacks: [database-url, http-addr, metrics-addr, callback-secret-key, callback-allow-insecure, callback-allow-private, callback-concurrency, callback-endpoint-concurrency, log-level, log-format]
migrate: [database-url, log-level, log-format]
{{- end }}

{{/*
The Secret and key a sensitive setting comes from: (dict "root" $ "item" "databaseURL"), with "chartSecret"
naming another chart-made Secret than the release's.
*/}}
{{- define "herald.secretKeyRef" -}}
{{- $s := index .root.Values.secrets .item }}
{{- if $s.existingSecret.name }}
name: {{ $s.existingSecret.name }}
key: {{ $s.existingSecret.key }}
{{- else }}
name: {{ .chartSecret | default (include "herald.fullname" .root) }}
key: {{ include "herald.secretKey" .item }}
{{- end }}
{{- end }}

{{/* The key of a sensitive setting in the chart-made Secret. */}}
{{- define "herald.secretKey" -}}
{{- get (dict "databaseURL" "database-url" "kafkaBrokers" "kafka-brokers" "botToken" "messenger-bot-token" "webhookSecret" "webhook-secret" "phoneHashKey" "phone-hash-key" "callbackSecretKey" "callback-secret-key" "botTokenKey" "bot-token-key") . }}
{{- end }}

{{/* The HTTP port of ingress, webhook, worker and callbacks: HERALD_HTTP_ADDR. */}}
{{- define "herald.httpPort" -}}8080{{- end }}

{{/* The metrics port of a component: (dict "root" $ "component" "worker"); the operator's is its own value. */}}
{{- define "herald.metricsPort" -}}
{{- if eq .component "operator" }}{{ .root.Values.operator.metricsPort }}{{ else }}{{ .root.Values.metrics.port }}{{ end }}
{{- end }}

{{/*
The HERALD_* environment of a component: (dict "root" $ "component" "worker"), optionally "chartSecret". Sensitive settings come from
Secrets, the rest are plain values; a value left empty is not passed, so the binary's default applies.
*/}}
{{- define "herald.env" -}}
{{- $root := .root }}
{{- $v := $root.Values }}
{{- $secretItems := dict "database-url" "databaseURL" "kafka-brokers" "kafkaBrokers" "messenger-bot-token" "botToken" "webhook-secret" "webhookSecret" "phone-hash-key" "phoneHashKey" "callback-secret-key" "callbackSecretKey" "bot-token-key" "botTokenKey" }}
{{- /* Integers go through int64: YAML numbers reach templates as float64, which print 7123456789 as 7.123456789e+09. */}}
{{- $admins := list }}
{{- range $v.messenger.devAdmins }}
{{- $admins = append $admins (int64 . | toString) }}
{{- end }}
{{- $plain := dict
  "kafka-topic-prefix" $v.kafka.topicPrefix
  "http-addr" (printf ":%s" (include "herald.httpPort" $root))
  "shutdown-delay" (get (index $v .component) "shutdownDelay" | default "")
  "messenger-api-url" $v.messenger.apiURL
  "public-url" $v.messenger.publicURL
  "messenger-bot-username" $v.messenger.botUsername
  "deep-link-base" $v.messenger.deepLinkBase
  "messenger-rate-limit" (toString $v.messenger.rateLimit)
  "messenger-per-chat-interval" $v.messenger.perChatInterval
  "dev-admins" (join "," $admins)
  "log-level" $v.log.level
  "log-format" $v.log.format
  "worker-group-id" $v.worker.groupID
  "worker-max-attempts" (int64 $v.worker.maxAttempts | toString)
  "worker-concurrency" (int64 $v.worker.concurrency | toString)
  "worker-lease" $v.worker.lease
  "metrics-addr" (printf ":%s" (include "herald.metricsPort" .))
  "trusted-proxies" (join "," $v.ingress.trustedProxies)
  "behind-proxy" (ternary "true" "" $v.kubernetesIngress.enabled)
  "retention-body-days" (int64 $v.retention.bodyDays | toString)
  "retention-notification-days" (int64 $v.retention.notificationDays | toString)
  "retention-expired" $v.retention.expired
  "retention-callback-days" (int64 $v.retention.callbackDays | toString)
  "callback-allow-insecure" (toString $v.callbacks.allowInsecure)
  "callback-allow-private" (toString $v.callbacks.allowPrivate)
  "callback-concurrency" (int64 $v.callbacks.concurrency | toString)
  "callback-endpoint-concurrency" (int64 $v.callbacks.endpointConcurrency | toString)
}}
{{- $envNames := dict
  "messenger-bot-token" "HERALD_MESSENGER_BOT_TOKEN"
  "messenger-bot-username" "HERALD_MESSENGER_BOT_USERNAME"
  "messenger-rate-limit" "HERALD_MESSENGER_RATE_LIMIT"
  "messenger-per-chat-interval" "HERALD_MESSENGER_PER_CHAT_INTERVAL"
}}
{{- $settings := index (include "herald.settings" $root | fromYaml) .component }}
{{- range $setting := $settings }}
{{- $env := get $envNames $setting | default (printf "HERALD_%s" ($setting | replace "-" "_" | upper)) }}
{{- if hasKey $secretItems $setting }}
- name: {{ $env }}
  valueFrom:
    secretKeyRef:
      {{- include "herald.secretKeyRef" (dict "root" $root "item" (get $secretItems $setting) "chartSecret" $.chartSecret) | trim | nindent 6 }}
{{- else if not (hasKey $plain $setting) }}
{{- fail (printf "herald.env: no value for setting %q" $setting) }}
{{- else if ne (get $plain $setting) "" }}
- name: {{ $env }}
  value: {{ get $plain $setting | quote }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The sensitive settings the chart-made Secret holds (those without an existing Secret), one per line.
*/}}
{{- define "herald.chartSecretItems" -}}
{{- range $item := list "databaseURL" "kafkaBrokers" "botToken" "webhookSecret" "phoneHashKey" "callbackSecretKey" "botTokenKey" }}
{{- if not (index $.Values.secrets $item).existingSecret.name }}
{{ $item }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The salt of checksum/secrets: secrets.checksumSalt, else the one kept in the chart-made Secret, else a new
random one (at install, or under helm template). Chosen once per render: every pod and the Secret agree.
*/}}
{{- define "herald.checksumSalt" -}}
{{- if not (hasKey .Values "heraldChecksumSalt_") }}
{{- $salt := .Values.secrets.checksumSalt | toString }}
{{- if not $salt }}
{{- $existing := (lookup "v1" "Secret" .Release.Namespace (include "herald.fullname" .)).data | default dict }}
{{- if hasKey $existing "checksum-salt" }}
{{- $salt = index $existing "checksum-salt" | b64dec }}
{{- else }}
{{- $salt = randAlphaNum 32 }}
{{- end }}
{{- end }}
{{- $_ := set .Values "heraldChecksumSalt_" $salt }}
{{- end }}
{{- index .Values "heraldChecksumSalt_" }}
{{- end }}

{{/*
A checksum of the values behind the Secrets, so pods roll when one changes. Pod specs are readable by far
more people than Secrets, so it must not let anyone confirm a guess of a value: the values are hashed with a
random salt kept in the chart-made Secret beside them. Without a chart-made Secret no value is in the chart,
only Secret names and keys, and those are hashed as they are.
*/}}
{{- define "herald.secretsChecksum" -}}
{{- if trim (include "herald.chartSecretItems" .) }}
{{- printf "%s\n%s" (include "herald.checksumSalt" .) (toJson .Values.secrets) | sha256sum }}
{{- else }}
{{- toJson .Values.secrets | sha256sum }}
{{- end }}
{{- end }}

{{/* Pod-level scheduling fields shared by the Deployments: (dict "root" $ "component" "worker"). */}}
{{- define "herald.scheduling" -}}
{{- $c := index .root.Values .component }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if $c.topologySpreadConstraints }}
topologySpreadConstraints:
{{- range $c.topologySpreadConstraints }}
{{- $tsc := . }}
{{- if not (hasKey $tsc "labelSelector") }}
{{- $tsc = merge (dict "labelSelector" (dict "matchLabels" (include "herald.selectorLabels" $ | fromYaml))) $tsc }}
{{- end }}
  - {{- toYaml $tsc | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}

{{- define "herald.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* A PodDisruptionBudget: (dict "root" $ "component" "worker"). */}}
{{- define "herald.pdb" -}}
{{- $c := index .root.Values .component }}
{{- if $c.podDisruptionBudget.enabled }}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "herald.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "herald.labels" . | nindent 4 }}
spec:
  {{- if ne (toString $c.podDisruptionBudget.minAvailable) "" }}
  minAvailable: {{ $c.podDisruptionBudget.minAvailable }}
  {{- else }}
  maxUnavailable: {{ $c.podDisruptionBudget.maxUnavailable }}
  {{- end }}
  selector:
    matchLabels:
      {{- include "herald.selectorLabels" . | nindent 6 }}
{{- end }}
{{- end }}

{{/* A CPU HorizontalPodAutoscaler: (dict "root" $ "component" "worker"). */}}
{{- define "herald.hpa" -}}
{{- $c := index .root.Values .component }}
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: {{ include "herald.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "herald.labels" . | nindent 4 }}
spec:
  scaleTargetRef:
    apiVersion: apps/v1
    kind: Deployment
    name: {{ include "herald.componentName" . }}
  minReplicas: {{ $c.autoscaling.minReplicas }}
  maxReplicas: {{ $c.autoscaling.maxReplicas }}
  metrics:
    - type: Resource
      resource:
        name: cpu
        target:
          type: Utilization
          averageUtilization: {{ $c.autoscaling.targetCPUUtilizationPercentage }}
{{- end }}

{{/* A ServiceAccount: (dict "root" $ "component" "worker" "automount" false). */}}
{{- define "herald.serviceAccount" -}}
{{- $c := index .root.Values .component }}
apiVersion: v1
kind: ServiceAccount
metadata:
  name: {{ include "herald.componentName" . }}
  namespace: {{ .root.Release.Namespace }}
  labels:
    {{- include "herald.labels" . | nindent 4 }}
  {{- with $c.serviceAccount.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
automountServiceAccountToken: {{ .automount }}
{{- end }}

{{/* The /tmp volume every container gets (the root filesystem is read-only). */}}
{{- define "herald.tmpVolume" -}}
- name: tmp
  emptyDir:
    sizeLimit: 64Mi
{{- end }}

{{/*
A component's Deployment: (dict "root" $ "component" "worker" "args" (list "worker") "replicas" 2
"automount" false "ports" (list (dict "name" "http" "port" 8080)) "probePort" "http"), optionally "volumes" and
"volumeMounts" (lists) besides /tmp.
replicas is left out of the spec when an autoscaler owns it (pass nil).
*/}}
{{- define "herald.deployment" -}}
{{- $root := .root }}
{{- $c := index $root.Values .component }}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "herald.componentName" . }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "herald.labels" . | nindent 4 }}
spec:
  {{- if not (kindIs "invalid" .replicas) }}
  replicas: {{ .replicas }}
  {{- end }}
  revisionHistoryLimit: 5
  selector:
    matchLabels:
      {{- include "herald.selectorLabels" . | nindent 6 }}
  template:
    metadata:
      labels:
        {{- include "herald.labels" . | nindent 8 }}
        {{- with $c.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- /* The checksum always; the pod's own annotations next; the scrape annotations unless they set theirs. */}}
        {{- $scrape := dict }}
        {{- if $root.Values.metrics.podAnnotations }}
        {{- range .ports }}
        {{- if eq .name "metrics" }}
        {{- $scrape = dict "prometheus.io/scrape" "true" "prometheus.io/port" (toString .port) "prometheus.io/path" "/metrics" }}
        {{- end }}
        {{- end }}
        {{- end }}
        {{- $annotations := merge (dict "checksum/secrets" (include "herald.secretsChecksum" $root)) (deepCopy ($c.podAnnotations | default dict)) $scrape }}
        {{- toYaml $annotations | nindent 8 }}
    spec:
      serviceAccountName: {{ include "herald.componentName" . }}
      automountServiceAccountToken: {{ .automount }}
      enableServiceLinks: false
      {{- with include "herald.imagePullSecrets" $root | trim }}
      {{- . | nindent 6 }}
      {{- end }}
      securityContext:
        {{- toYaml $root.Values.podSecurityContext | nindent 8 }}
      terminationGracePeriodSeconds: 30
      {{- with include "herald.scheduling" . | trim }}
      {{- . | nindent 6 }}
      {{- end }}
      containers:
        - name: {{ .component }}
          image: {{ include "herald.image" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          args:
            {{- toYaml .args | nindent 12 }}
          env:
            {{- include "herald.env" . | trim | nindent 12 }}
            # The Go runtime collects harder as it nears the container's memory limit instead of being
            # OOM-killed (the ingress benchmark runs with the same soft limit).
            - name: GOMEMLIMIT
              valueFrom:
                resourceFieldRef:
                  resource: limits.memory
            {{- with $c.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            {{- range .ports }}
            - name: {{ .name }}
              containerPort: {{ .port }}
              protocol: TCP
            {{- end }}
          startupProbe:
            httpGet:
              path: /healthz
              port: {{ .probePort }}
            periodSeconds: 2
            failureThreshold: 30
          livenessProbe:
            httpGet:
              path: /healthz
              port: {{ .probePort }}
            periodSeconds: 10
            timeoutSeconds: 2
            failureThreshold: 3
          readinessProbe:
            httpGet:
              path: /readyz
              port: {{ .probePort }}
            periodSeconds: 5
            timeoutSeconds: 2
            failureThreshold: 3
          resources:
            {{- toYaml $c.resources | nindent 12 }}
          securityContext:
            {{- toYaml $root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: tmp
              mountPath: /tmp
            {{- with .volumeMounts }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
      volumes:
        {{- include "herald.tmpVolume" . | nindent 8 }}
        {{- with .volumes }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
{{- end }}
