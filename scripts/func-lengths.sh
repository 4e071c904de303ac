#!/usr/bin/env bash
# Lists C functions longer than a limit (lines from the signature to the
# closing brace, as universal-ctags counts them), longest first.
#
#   scripts/func-lengths.sh [LIMIT] [PATH...]   list (default 80; src/)
#   scripts/func-lengths.sh --check             the rule make test checks:
#       no function over 80 lines outside src/kernels (vector kernels are
#       long on purpose), except those in scripts/long-functions.txt, the
#       known ones still to be split; a listed one that is now short must
#       leave the list, so it only shrinks.
set -euo pipefail
cd "$(dirname "$0")/.."

lengths() { # LIMIT PATH... -> "lines path function" over LIMIT
  local limit=$1
  shift
  ctags -f - --languages=C --kinds-C=f --fields=+ne -R "$@" |
    awk -F'\t' -v limit="$limit" '{
      n = ""; e = ""
      for (i = 4; i <= NF; i++) {
        if ($i ~ /^line:/) n = substr($i, 6)
        if ($i ~ /^end:/) e = substr($i, 5)
      }
      if (e != "" && e - n + 1 > limit) print e - n + 1, $2, $1
    }' | sort -k1,1nr -k2,2 -k3,3
}

if [ "${1:-}" != "--check" ]; then
  limit=${1:-80}
  shift || true
  [ $# -gt 0 ] || set -- src
  lengths "$limit" "$@"
  exit 0
fi

allow=scripts/long-functions.txt
# grep selecting nothing (no long function left, an empty list) is no error
found=$(lengths 80 src | { grep -v ' src/kernels/' || true; } | awk '{print $2, $3}' | sort)
known=$({ grep -v '^#' "$allow" || true; } | awk 'NF {print $1, $2}' | sort)
new=$(comm -23 <(echo "$found") <(echo "$known") | sed '/^$/d')
gone=$(comm -13 <(echo "$found") <(echo "$known") | sed '/^$/d')
rc=0
if [ -n "$new" ]; then
  echo "func-lengths: over 80 lines (split them, or see $allow):" >&2
  echo "$new" | sed 's/^/  /' >&2
  rc=1
fi
if [ -n "$gone" ]; then
  echo "func-lengths: now 80 lines or fewer; remove from $allow:" >&2
  echo "$gone" | sed 's/^/  /' >&2
  rc=1
fi
[ $rc -eq 0 ] && echo "func-lengths: clean ($(echo "$known" | sed '/^$/d' | wc -l) known long functions left)"
exit $rc
