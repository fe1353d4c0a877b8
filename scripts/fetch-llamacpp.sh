#!/usr/bin/env bash
# fetch-llamacpp.sh - puts llama.cpp's CPU build, as the npm package
# node-llama-cpp@3.21.1 ships it (llama.cpp v0.4.0 prebuilt, no compiler
# needed), into the FlexGen cache, once:
#   ${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/llamacpp/node_modules/node-llama-cpp
# The tests use it as an outside oracle for the Llama family
# (tests/ref/llamacpp_oracle.mjs); nothing in the engine links it.
#
# Only node-llama-cpp and its CPU binary package for this machine are
# installed: --omit=optional leaves out the CUDA and Vulkan builds (hundreds
# of MB) and --ignore-scripts its postinstall, which would otherwise try to
# download and build llama.cpp from source when it distrusts the binary.
# The lockfile's integrity hashes of those two packages are checked against
# the ones below, so another version or a tampered tarball is refused.
#
# Idempotent and quiet when already there. Prints the folder on success.
# Exit status: 0 ok; 3 it cannot be installed here: the npm registry cannot
# be reached, or node/npm are missing and this user cannot apt-get them (tests
# turn that into a skip); 1 anything else (wrong hashes, a failed install,
# node older than 18, a machine with no CPU build).
# The node/npm install and the cache's stamp are npm-cache.sh's.
set -euo pipefail
NPM_CACHE_WHO=fetch-llamacpp
. "$(dirname "$0")/npm-cache.sh"

ver=3.21.1
dir="${FLEXGEN_CACHE:-$HOME/.cache/flexgen}/llamacpp"

case "$(uname -m)" in
  x86_64) plat=linux-x64
    plat_sri=sha512-Totj6RTDMGo3FoK2yNUaz/oGmZD0olAqTrRluFUWmu0kW2i9TOzHSW0OWCAiGkzRCVX0WsU2CyUQo/W2NYtdPA== ;;
  aarch64) plat=linux-arm64
    plat_sri=sha512-eI3anSEGzJiwF2rpMpZVTdHzw47LztbvfvuRzlu/fPO18ROnBOd+75RPUBlV6qENPpmNtbov85+3VODwEwBurg== ;;
  *) echo "fetch-llamacpp: error: no node-llama-cpp CPU build for $(uname -m)" >&2; exit 1 ;;
esac
main_sri=sha512-E3N0Ev2Va0wzydvXYFwM9Hvyo07PoWjt8T/9GMc43Cvt8YkV/NU/tYUgEMC1grTPv2o9PRjQi0G3Wb5P/awiMg==

verify() { # verify DIR: the lockfile names both packages with the pinned hashes
  [ -f "$1/package-lock.json" ] || return 1
  [ -d "$1/node_modules/@node-llama-cpp/$plat/bins" ] || return 1
  node -e '
    const lock = require(process.argv[1]);
    const want = {"node_modules/node-llama-cpp": process.argv[2],
                  ["node_modules/@node-llama-cpp/" + process.argv[4]]: process.argv[3]};
    for (const [k, sri] of Object.entries(want)) {
      const p = lock.packages[k];
      if (!p || p.version !== "'"$ver"'" || p.integrity !== sri) process.exit(1);
    }' "$1/package-lock.json" "$main_sri" "$plat_sri" "$plat"
}

npm_cache_need 3 node npm
if [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 18 ]; then
  echo "fetch-llamacpp: error: node-llama-cpp needs node >= 18, this is $(node --version)" >&2
  exit 1
fi

# The stamp is written last, so a present stamp means a complete, checked copy.
if [ -f "$dir/.complete" ] && verify "$dir"; then echo "$dir"; exit 0; fi

mkdir -p "$(dirname "$dir")"
stage="$dir.tmp.$$"
rm -rf "$stage"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage"
echo '{"name": "flexgen-llamacpp-oracle", "private": true}' >"$stage/package.json"
if ! (cd "$stage" && npm view --loglevel=error --fetch-retries=1 "node-llama-cpp@$ver" version >/dev/null 2>"$stage/view.log"); then
  echo "fetch-llamacpp: error: the npm registry cannot be reached (npm view node-llama-cpp@$ver):" >&2
  tail -3 "$stage/view.log" >&2
  exit 3
fi
echo "fetch-llamacpp: installing node-llama-cpp@$ver ($plat) into $dir" >&2
if ! (cd "$stage" && npm install --loglevel=error --no-audit --no-fund --ignore-scripts --omit=optional \
        --save-exact "node-llama-cpp@$ver" "@node-llama-cpp/$plat@$ver" >"$stage/install.log" 2>&1); then
  echo "fetch-llamacpp: error: npm install failed:" >&2
  tail -5 "$stage/install.log" >&2
  exit 1
fi
if ! verify "$stage"; then
  echo "fetch-llamacpp: error: the installed packages do not have the pinned integrity hashes" >&2
  exit 1
fi
rm -f "$stage/view.log" "$stage/install.log"
npm_cache_publish "$stage" "$dir" .complete
trap - EXIT
echo "$dir"
