#!/usr/bin/env bash
# Provides the tools that check the chart's monitoring objects, in one folder:
#
#   promrules-check   the checks of `promtool check rules` (Prometheus' own rulefmt + PromQL parser +
#                     template parsing + duplicate-rules lint), built from promrules-check/ in this folder
#   crds/             the prometheus-operator CRDs the chart's monitoring objects need, copied out of the
#                     github.com/prometheus-operator/prometheus-operator module zip:
#                     monitoring.coreos.com_{servicemonitors,podmonitors,prometheusrules}.yaml
#
#   1. If MEMGATE_PROMETHEUS_TOOLS names a folder holding both, use it (versions not checked).
#   2. Otherwise ${XDG_CACHE_HOME:-$HOME/.cache}/memgate/prometheus-tools-v<module>-operator-v<version>/bin,
#      built once from the Go module proxy (about 40 s of CPU; later runs reuse it).
#
# The versions are pinned in versions.env (and go.mod/go.sum) next to this script. Logs go to stderr; the
# LAST line of stdout is the absolute path of the folder.
set -Eeuo pipefail

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source-path=SCRIPTDIR source=versions.env
source "${script_dir}/versions.env"
# shellcheck source=../../scripts/lib/cached-build.sh
source "${script_dir}/../../scripts/lib/cached-build.sh"
: "${PROMETHEUS_MODULE_VERSION:?versions.env must set PROMETHEUS_MODULE_VERSION}"
: "${PROMETHEUS_OPERATOR_VERSION:?versions.env must set PROMETHEUS_OPERATOR_VERSION}"
: "${PROMETHEUS_OPERATOR_MODULE_SUM:?versions.env must set PROMETHEUS_OPERATOR_MODULE_SUM}"

operator_module=github.com/prometheus-operator/prometheus-operator
crd_files=(
  monitoring.coreos.com_servicemonitors.yaml
  monitoring.coreos.com_podmonitors.yaml
  monitoring.coreos.com_prometheusrules.yaml
)

if [[ -n "${MEMGATE_PROMETHEUS_TOOLS:-}" ]]; then
  [[ -x "${MEMGATE_PROMETHEUS_TOOLS}/promrules-check" ]] || {
    echo "prometheus-tools/provide.sh: MEMGATE_PROMETHEUS_TOOLS=${MEMGATE_PROMETHEUS_TOOLS} has no executable promrules-check" >&2
    exit 1
  }
  for f in "${crd_files[@]}"; do
    [[ -f "${MEMGATE_PROMETHEUS_TOOLS}/crds/${f}" ]] || {
      echo "prometheus-tools/provide.sh: MEMGATE_PROMETHEUS_TOOLS=${MEMGATE_PROMETHEUS_TOOLS} has no crds/${f}" >&2
      exit 1
    }
  done
  echo "${MEMGATE_PROMETHEUS_TOOLS}"
  exit 0
fi
command -v go >/dev/null || { echo "prometheus-tools/provide.sh: go is not installed (scripts/lib/provision.sh installs it)" >&2; exit 1; }
grep -q "^[[:space:]]*github.com/prometheus/prometheus v${PROMETHEUS_MODULE_VERSION}\$" "${script_dir}/go.mod" || {
  echo "prometheus-tools/provide.sh: go.mod does not require github.com/prometheus/prometheus v${PROMETHEUS_MODULE_VERSION} (versions.env);" \
    "run: go get github.com/prometheus/prometheus@v${PROMETHEUS_MODULE_VERSION} && go mod tidy" >&2
  exit 1
}

# The checker's sources are part of the stamp, so an edit to them rebuilds it.
sources=(go.mod go.sum promrules-check/main.go)
source_hash="$(cd "${script_dir}" && cat "${sources[@]}" | sha256sum | cut -c1-16)"

build_prometheus_tools() {
  local work="$1"
  # cached_build runs this function where `set -e` does not apply: every step ends in `|| return 1`.
  mkdir -p "${work}/src/promrules-check" "${work}/bin/crds" "${work}/check" || return 1
  (cd "${script_dir}" && cp go.mod go.sum "${work}/src/" && cp promrules-check/main.go "${work}/src/promrules-check/") || return 1
  local copied_hash
  copied_hash="$(cd "${work}/src" && cat "${sources[@]}" | sha256sum | cut -c1-16)"
  [[ "${copied_hash}" == "${source_hash}" ]] || {
    echo "prometheus-tools/provide.sh: the sources changed while building; run again" >&2
    return 1
  }

  # The checker: a small main over github.com/prometheus/prometheus/model/rulefmt (see its comment).
  (cd "${work}/src" && GOWORK=off nice_go build -trimpath -ldflags "-s -w" -o "${work}/bin/promrules-check" ./promrules-check >&2) || return 1
  local reported
  reported="$("${work}/bin/promrules-check" -version 2>&1)"
  [[ "${reported}" == "promrules-check github.com/prometheus/prometheus v${PROMETHEUS_MODULE_VERSION}" ]] || {
    echo "prometheus-tools/provide.sh: built promrules-check reports '${reported}', expected v${PROMETHEUS_MODULE_VERSION}" >&2
    return 1
  }
  check_checker "${work}/bin/promrules-check" "${work}/check" || return 1

  # The CRDs: only the operator's module zip is downloaded (no dependencies); example/ is part of the
  # zip (only folders with their own go.mod, pkg/apis/monitoring and pkg/client, are left out of it).
  # (From a throwaway module, so no go.mod or go.work around the cache folder takes part.)
  local info dir sum
  mkdir -p "${work}/download" && printf 'module memgate.local/prometheus-operator-crds\n\ngo 1.26\n' >"${work}/download/go.mod" || return 1
  info="$(cd "${work}/download" && GOWORK=off nice_go mod download -json "${operator_module}@v${PROMETHEUS_OPERATOR_VERSION}")" || {
    echo "prometheus-tools/provide.sh: go mod download ${operator_module}@v${PROMETHEUS_OPERATOR_VERSION} failed: ${info}" >&2
    return 1
  }
  dir="$(sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p' <<<"${info}")"
  sum="$(sed -n 's/^[[:space:]]*"Sum": "\(.*\)",$/\1/p' <<<"${info}")"
  [[ "${sum}" == "${PROMETHEUS_OPERATOR_MODULE_SUM}" ]] || {
    echo "prometheus-tools/provide.sh: ${operator_module}@v${PROMETHEUS_OPERATOR_VERSION} has sum '${sum}', versions.env pins ${PROMETHEUS_OPERATOR_MODULE_SUM}" >&2
    return 1
  }
  local f name
  for f in "${crd_files[@]}"; do
    install -m 0644 "${dir}/example/prometheus-operator-crd/${f}" "${work}/bin/crds/${f}" || return 1
    name="${f#monitoring.coreos.com_}"
    name="${name%.yaml}.monitoring.coreos.com"
    if ! { grep -qx 'apiVersion: apiextensions.k8s.io/v1' "${work}/bin/crds/${f}" &&
      grep -qx 'kind: CustomResourceDefinition' "${work}/bin/crds/${f}" &&
      grep -qx "  name: ${name}" "${work}/bin/crds/${f}" &&
      grep -qx "    operator.prometheus.io/version: ${PROMETHEUS_OPERATOR_VERSION}" "${work}/bin/crds/${f}"; }; then
      echo "prometheus-tools/provide.sh: ${f} is not the v1 CRD ${name} of operator ${PROMETHEUS_OPERATOR_VERSION}" >&2
      return 1
    fi
  done
}

# The checker must accept a valid rules file and refuse what `promtool check rules` refuses.
check_checker() {
  local checker="$1" dir="$2"
  cat >"${dir}/good.yaml" <<'YAML' || return 1
groups:
  - name: memgate
    rules:
      - record: memgate:requests:rate5m
        expr: sum by (namespace) (rate(memgate_requests_total[5m]))
      - alert: MemgateDown
        expr: absent(up{job="memgate"} == 1)
        for: 5m
        labels:
          severity: critical
        annotations:
          summary: "memgate in {{ $labels.namespace }} is down (value {{ $value }})"
YAML
  # shellcheck disable=SC2016 # the $ signs are the template's, not the shell's
  sed 's/rate(memgate_requests_total\[5m\])/rate(memgate_requests_total[5m]/' "${dir}/good.yaml" >"${dir}/bad-promql.yaml" &&
    sed 's/{{ \$labels.namespace }}/{{ $labels.namespace /' "${dir}/good.yaml" >"${dir}/bad-template.yaml" &&
    sed 's/^  - name: memgate$/  - name: memgate\n    unknown_field: 1/' "${dir}/good.yaml" >"${dir}/unknown-field.yaml" &&
    sed -n '1,5p' "${dir}/good.yaml" >"${dir}/duplicate.yaml" &&
    sed -n '4,5p' "${dir}/good.yaml" >>"${dir}/duplicate.yaml" || return 1
  expect() {
    local want_code="$1" want_text="$2" out code=0
    shift 2
    out="$("${checker}" "$@" 2>&1)" || code=$?
    [[ "${code}" == "${want_code}" && "${out}" == *"${want_text}"* ]] || {
      printf 'prometheus-tools/provide.sh: promrules-check %s: exit %s, expected %s with "%s"; output:\n%s\n' \
        "$*" "${code}" "${want_code}" "${want_text}" "${out}" >&2
      return 1
    }
  }
  expect 0 "SUCCESS: 2 rules found" "${dir}/good.yaml" &&
    expect 0 "SUCCESS: 2 rules found" <"${dir}/good.yaml" &&
    expect 1 "could not parse expression" "${dir}/bad-promql.yaml" &&
    expect 1 'annotation "summary"' "${dir}/bad-template.yaml" &&
    expect 1 "field unknown_field not found" "${dir}/unknown-field.yaml" &&
    expect 3 "1 duplicate rule(s) found" -lint-fatal "${dir}/duplicate.yaml" &&
    expect 0 "SUCCESS: 2 rules found" -lint=none "${dir}/duplicate.yaml"
}

bin="$(cached_build "prometheus-tools-v${PROMETHEUS_MODULE_VERSION}-operator-v${PROMETHEUS_OPERATOR_VERSION}" \
  "promrules-check=prometheus@v${PROMETHEUS_MODULE_VERSION} src=${source_hash} crds=prometheus-operator@v${PROMETHEUS_OPERATOR_VERSION}" \
  build_prometheus_tools)"
echo "${bin}"
