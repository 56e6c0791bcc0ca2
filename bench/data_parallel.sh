#!/usr/bin/env bash
# Data-parallel throughput of `mixprec train` on this machine: N ranks x 1 thread against one
# process x 1 thread on the same global batch (issue 14's target: >= 1.8x for 2 ranks on the
# seed MLP), unsharded and with --shard-optimizer, for several global batch sizes. Each cell is
# the median samples/s (train_samples / train_seconds from the JSONL log) of --reps runs, and the
# ratio to the one-process median of the same batch size, measured in the same invocation.
#
# Usage: bench/data_parallel.sh [--build DIR] [--ranks N] [--batches "256 1024"] [--steps S]
#                               [--reps R] [--btl vader|tcp] [--model seed-mlp] [--precision fp32]
# vader = Open MPI's shared-memory transport (one host); tcp = loopback TCP (what the tests use).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="$(dirname "$here")/build" ranks=2 batches="256 1024" steps=12 reps=3 btl=vader model=seed-mlp precision=fp32
die() { echo "data_parallel.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build) build="${2:?}"; shift 2 ;;
    --ranks) ranks="${2:?}"; shift 2 ;;
    --batches) batches="${2:?}"; shift 2 ;;
    --steps) steps="${2:?}"; shift 2 ;;
    --reps) reps="${2:?}"; shift 2 ;;
    --btl) btl="${2:?}"; shift 2 ;;
    --model) model="${2:?}"; shift 2 ;;
    --precision) precision="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
mixprec="$build/mixprec"
[[ -x "$mixprec" ]] || die "no mixprec binary at $mixprec; build first or pass --build"
command -v mpirun >/dev/null || die "mpirun not found (Debian: openmpi-bin)"
case "$btl" in
  vader) transport=(--mca btl self,vader) ;;
  tcp) transport=(--mca btl self,tcp --mca btl_tcp_if_include lo) ;;
  *) die "--btl must be vader or tcp" ;;
esac
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1
flags=(--oversubscribe --allow-run-as-root --bind-to core -x OMP_NUM_THREADS --mca oob_tcp_if_include lo "${transport[@]}")

rate() {  # rate NP ARGS... -> samples/s of one run
  local np=$1
  shift
  if [[ "$np" -eq 1 ]]; then
    "$mixprec" train "$@" --log "$work/log.jsonl" > "$work/out" 2>&1
  else
    mpirun -np "$np" "${flags[@]}" "$mixprec" train "$@" --log "$work/log.jsonl" > "$work/out" 2>&1
  fi || { cat "$work/out" >&2; die "a run failed"; }
  python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])['samples_per_second'])" "$work/log.jsonl"
}
median() { python3 -c "import statistics,sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); flags: $(grep -m1 -o -w -E 'avx512_bf16|avx512f|avx2|fma|f16c' /proc/cpuinfo | sort -u | xargs)"
echo "model $model, $precision, 1 thread per rank, btl $btl, $steps steps per run, median of $reps runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| global batch | 1 x 1 samples/s | $ranks x 1 samples/s | ratio | $ranks x 1 --shard-optimizer | ratio |"
echo "|---|---|---|---|---|---|"
for b in $batches; do
  common=(--model "$model" --precision "$precision" --batch-size "$b" --limit-train $((b * steps)) --limit-test 64
          --threads 1 --epochs 1 --no-progress --scheduler none)
  one=() many=() sharded=()
  for ((i = 0; i < reps; i++)); do
    one+=("$(rate 1 "${common[@]}")")
    many+=("$(rate "$ranks" "${common[@]}")")
    sharded+=("$(rate "$ranks" "${common[@]}" --shard-optimizer)")
  done
  m1=$(median "${one[@]}") mn=$(median "${many[@]}") ms=$(median "${sharded[@]}")
  python3 -c "import sys; b,a,n,s=sys.argv[1:]; a,n,s=float(a),float(n),float(s); print(f'| {b} | {a:.0f} | {n:.0f} | {n/a:.2f}x | {s:.0f} | {s/a:.2f}x |')" "$b" "$m1" "$mn" "$ms"
done
echo
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
