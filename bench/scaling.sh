#!/usr/bin/env bash
# Scaling runs of `mixprec bench` for docs/performance.md: the seed MLP's step time against batch
# size (64..1024), hidden width (512..8192) and threads (1 vs 2) in fp32 and bf16, and peak memory
# by category for every precision mode at batch 256 and 4096. Prints Markdown tables.
#
# Usage: bench/scaling.sh [--build DIR] [--steps N] [--only batch|width|threads|memory]
#   --build DIR   build directory holding the mixprec binary (default: <repo>/build)
#   --steps N     timed steps per run (default 5; memory runs use 2)
#   --only PART   run one part only
# Every run is a separate process; the load average is printed before and after, because a
# busy machine slows every row (ratios within one table are the comparable figures).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$(dirname "$here")/build" steps=5 only=""
die() { echo "scaling.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --only) only="${2:?--only needs a part}"; shift 2 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, got '$steps'"
case "$only" in ""|batch|width|threads|memory) ;; *) die "--only must be batch, width, threads or memory" ;; esac
mixprec="$build/mixprec"
[[ -x "$mixprec" ]] || die "no mixprec binary at $mixprec; build first (see README) or pass --build"
command -v python3 >/dev/null || die "python3 is needed to read the JSON results"

# bench ARGS... -> one JSON object on stdout
bench() { "$mixprec" bench --model seed-mlp --json "$@"; }
# row JSON LABEL: one Markdown row of a bench result
row() { python3 "$here/bench_row.py" step "$2" "$1"; }
header() {
  echo
  echo "### $1"
  echo
  echo "| $2 | precision | step ms (median) | GEMMs ms | optimizer ms | floor ratio | GFLOP/s | system allocs/step |"
  echo "|---|---|---|---|---|---|---|---|"
}

"$mixprec" env 2>/dev/null | head -4 || true
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"

# sweep PART TITLE FLAG VALUES...: one table, a row per value and precision (2 threads unless
# the sweep is over --threads)
sweep() {
  local part="$1" title="$2" flag="$3"; shift 3
  [[ -z "$only" || "$only" == "$part" ]] || return 0
  local threads=(--threads 2); [[ "$flag" == --threads ]] && threads=()
  header "$title" "$part"
  for v in "$@"; do
    for p in fp32 bf16; do
      row "$(bench --precision "$p" "${threads[@]}" "$flag" "$v" --steps "$steps" --warmup 2)" "$v"
    done
  done
}
sweep batch "Batch size (width 4096, 2 threads)" --batch-size 64 128 256 512 1024
sweep width "Hidden width (batch 256, 2 threads)" --width 512 1024 2048 4096 8192
sweep threads "Threads (batch 256, width 4096)" --threads 1 2
if [[ -z "$only" || "$only" == memory ]]; then
  echo
  echo "### Peak memory by category (MiB; seed MLP, 21.0 M parameters)"
  echo
  echo "| batch | mode | parameter | gradient | optimizer_state | activation | total | vs fp32 |"
  echo "|---|---|---|---|---|---|---|---|"
  for b in 256 4096; do
    fp32_total=""
    for p in fp32 bf16 fp16 pure-bf16 pure-bf16-sr; do
      json="$(bench --precision "$p" --batch-size "$b" --threads 2 --steps 2 --warmup 1)"
      line="$(python3 "$here/bench_row.py" memory "$b" "$json" "$fp32_total")"
      echo "$line" | head -1
      [[ -z "$fp32_total" ]] && fp32_total="$(echo "$line" | tail -1)"
    done
  done
fi
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
