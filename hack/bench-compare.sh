#!/usr/bin/env bash
# bench-compare.sh BASE [HEAD]: the in-process translation figures of two
# commits side by side in one run — full translation, one changed route and
# one endpoint change at 1,000 and 10,000 routes (internal/pipeline's
# benchmarks) — each commit built in a worktree of its own, the runs
# interleaved (base, head, base, head, …) so that both see the same machine.
# Prints a table of the medians and the change. HEAD defaults to HEAD.
#
#   hack/bench-compare.sh eb4e16b          # ROUNDS=5 BENCHTIME=5x by default
#   PATTERN='^BenchmarkEndpointChange$' BENCHTIME=300x hack/bench-compare.sh eb4e16b
set -euo pipefail
export GOTOOLCHAIN=go1.27.3
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BASE=${1:?usage: hack/bench-compare.sh BASE [HEAD]}
HEAD=${2:-HEAD}
ROUNDS=${ROUNDS:-5}
BENCHTIME=${BENCHTIME:-5x}
PATTERN=${PATTERN:-'^(BenchmarkFullTranslation|BenchmarkIncrementalRouteChange|BenchmarkEndpointChange)$/routes=(1000|10000)$'}

WORK=$(mktemp -d /tmp/portico-bench-compare.XXXXXX)
cleanup() {
  git -C "$ROOT" worktree remove --force "$WORK/base" >/dev/null 2>&1 || true
  git -C "$ROOT" worktree remove --force "$WORK/head" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

for side in base head; do
  rev=$BASE
  [ "$side" = head ] && rev=$HEAD
  git -C "$ROOT" worktree add -q --detach "$WORK/$side" "$rev"
  (cd "$WORK/$side" && go test -c -o "$WORK/$side.test" ./internal/pipeline/)
done

for round in $(seq "$ROUNDS"); do
  for side in base head; do
    echo "round $round/$ROUNDS: $side" >&2
    (cd "$WORK/$side/internal/pipeline" && "$WORK/$side.test" -test.run '^$' -test.bench "$PATTERN" \
      -test.benchtime "$BENCHTIME" -test.count 1) | grep '^Benchmark' | sed "s/^/$side /" >>"$WORK/results"
  done
done

echo
echo "| benchmark | base $(git -C "$ROOT" rev-parse --short "$BASE") (ms) | head $(git -C "$ROOT" rev-parse --short "$HEAD") (ms) | change |"
echo "|---|---|---|---|"
awk '
  { name=$2; sub(/-[0-9]+$/, "", name); ns=$4; v[$1 SUBSEP name] = v[$1 SUBSEP name] " " ns; names[name]=1 }
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  END {
    for (name in names) {
      b = median(v["base" SUBSEP name]) / 1e6; h = median(v["head" SUBSEP name]) / 1e6
      printf "| %s | %.3f | %.3f | %+.1f%% |\n", name, b, h, (h - b) / b * 100
    }
  }' "$WORK/results" | sort
