{{/*
Chart name, overridable with nameOverride (63 characters at most: a label value).
*/}}
{{- define "memgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object name: fullnameOverride, else the release name when it already contains the
chart name, else <release>-<chart>. Kept to 38 characters so that the longest name,
"<prefix>-operator-leader-election" (25 more), stays within the 63 characters of a label value
and a DNS label, even for a 53-character release name (Helm's longest).
*/}}
{{- define "memgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 38 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 38 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Name of the operator's Deployment, ServiceAccount, ClusterRole, ClusterRoleBinding and Lease.
*/}}
{{- define "memgate.operatorName" -}}
{{- printf "%s-operator" (include "memgate.fullname" .) }}
{{- end }}

{{/*
The operator's ServiceAccount, which its bindings name: operator.serviceAccount.name, else the
operator's name. With operator.serviceAccount.create false it must already exist.
*/}}
{{- define "memgate.serviceAccountName" -}}
{{- default (include "memgate.operatorName" .) .Values.operator.serviceAccount.name }}
{{- end }}

{{/*
chart label value: <name>-<version>.
*/}}
{{- define "memgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels that select the operator pods (never change them on upgrade: a Deployment's selector is
immutable).
*/}}
{{- define "memgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/*
Standard labels of every object of the chart.
*/}}
{{- define "memgate.labels" -}}
helm.sh/chart: {{ include "memgate.chart" . }}
{{ include "memgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: memgate
{{- end }}

{{/*
Operator image: repository@digest when image.digest is set (pinned, immutable), else repository:tag,
the tag defaulting to the chart's appVersion.
*/}}
{{- define "memgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
Gateway image: the operator's image unless gateway.image says otherwise (one image holds both
binaries).
*/}}
{{- define "memgate.gatewayImage" -}}
{{- if or .Values.gateway.image.repository .Values.gateway.image.tag }}
{{- $repository := default .Values.image.repository .Values.gateway.image.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.gateway.image.tag }}
{{- printf "%s:%s" $repository $tag }}
{{- else }}
{{- include "memgate.image" . }}
{{- end }}
{{- end }}

{{/*
Rules of the document named .name in files/operator-rbac.yaml, the chart's copy of
operator/rbac/operator-rbac.yaml (e2e/tests/helm_chart.rs fails when the two differ). The chart
never writes rules of its own: the file is the one place the operator's access is decided. The only
edit: the gateway token-review ClusterRole the operator may bind is this release's.
*/}}
{{- define "memgate.rbacRules" -}}
{{- $name := .name }}
{{- $found := false }}
{{- range $document := regexSplit "(?m)^---\\s*$" (.context.Files.Get "files/operator-rbac.yaml") -1 }}
{{- $object := fromYaml $document }}
{{- if and $object (eq (toString (dig "metadata" "name" "" $object)) $name) }}
{{- $found = true }}
{{- toYaml (get $object "rules") | replace "memgate-gateway-token-review" (include "memgate.tokenReviewRoleName" $.context) }}
{{- end }}
{{- end }}
{{- if not $found }}
{{- fail (printf "files/operator-rbac.yaml holds no %s" $name) }}
{{- end }}
{{- end }}

{{/*
The ClusterRole of gateways whose providers accept ServiceAccount tokens (tokenreviews: create).
*/}}
{{- define "memgate.tokenReviewRoleName" -}}
{{- printf "%s-gateway-token-review" (include "memgate.fullname" .) }}
{{- end }}

{{/*
Settings that values.schema.json cannot express (they relate two values).
*/}}
{{- define "memgate.checks" -}}
{{- if eq (int .Values.gateway.port) (int .Values.gateway.adminPort) }}
{{- fail "gateway.adminPort must differ from gateway.port (the admin port is never on the Service)" }}
{{- end }}
{{- if ge (int .Values.operator.leaseGraceSeconds) (int .Values.operator.leaseDurationSeconds) }}
{{- fail "operator.leaseGraceSeconds must be shorter than operator.leaseDurationSeconds" }}
{{- end }}
{{- end }}
