# Sourced by the Python test runners: `ensure_venv NAME REQUIREMENTS` prints the path of a venv in
# the memgate cache folder holding exactly REQUIREMENTS, creating or refreshing it when the file changed.
ensure_venv() {
  local name="$1" requirements="$2"
  local cache="${MEMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memgate}"
  local venv="$cache/$name" python="${PYTHON:-python3}" stamp
  stamp="$(sha256sum "$requirements" | cut -d' ' -f1)"
  if [[ ! -x "$venv/bin/python" || "$(cat "$venv/.requirements-sha256" 2>/dev/null)" != "$stamp" ]]; then
    rm -rf "$venv"
    mkdir -p "$cache"
    "$python" -m venv "$venv" >&2
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements" >&2
    echo "$stamp" > "$venv/.requirements-sha256"
  fi
  echo "$venv"
}
