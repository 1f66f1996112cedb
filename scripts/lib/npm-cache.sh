# Sourced by the end-to-end runners that need npm packages: `npm_cached_install NAME DIR` installs
# DIR's package.json + package-lock.json with `npm ci` into the cache folder
# `<cache>/NAME-<hash of both files>` (reused while they are unchanged) and prints that folder.
# Installed beside, then moved into place: an interrupted install never looks complete. Other
# versions' folders go, and installs left over from an interrupted run an hour ago.
npm_cached_install() {
  local name="$1" dir="$2" cache stamp modules partial
  cache="${MEMGATE_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/memgate}"
  stamp="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -c1-16)"
  modules="$cache/$name-$stamp"
  if [[ ! -d "$modules/node_modules" ]]; then
    mkdir -p "$cache"
    partial="$(mktemp -d "$cache/$name-partial.XXXXXX")"
    cp "$dir/package.json" "$dir/package-lock.json" "$partial/"
    (cd "$partial" && npm ci --no-audit --no-fund --loglevel=error >&2)
    find "$cache" -maxdepth 1 -name "$name-*" ! -name "$name-partial.*" ! -name "$name-$stamp" \
      -exec rm -rf {} +
    find "$cache" -maxdepth 1 -name "$name-partial.*" -mmin +60 -exec rm -rf {} +
    mv -T "$partial" "$modules" 2>/dev/null || rm -rf "$partial"
  fi
  echo "$modules"
}
