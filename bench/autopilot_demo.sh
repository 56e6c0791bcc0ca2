#!/usr/bin/env bash
# The precision autopilot's demonstration: sensor-mlp (Fashion-MNIST as raw 16-bit sensor counts,
# whose first layer does not fit fp16 while the rest does) trained in fp32, bf16, plain fp16 and
# --precision auto-layer --compute fp16, side by side: final test accuracy, skipped steps, the
# share of GEMM FLOPs in 16 bits, and the autopilot's overhead, measured as training time against
# a replay of the policy it wrote (the same dtypes, no statistics), interleaved, medians of REPS.
#
#   bench/autopilot_demo.sh [build/mixprec] [--epochs 3] [--reps 3] [--threads 2] [--seed 0]
set -euo pipefail
MIXPREC="${1:-build/mixprec}"
[ $# -gt 0 ] && shift
EPOCHS=3 REPS=3 THREADS=2 SEED=0
while [ $# -gt 0 ]; do
  case "$1" in
    --epochs) EPOCHS="$2"; shift 2 ;;
    --reps) REPS="$2"; shift 2 ;;
    --threads) THREADS="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
common=(train --model sensor-mlp --epochs "$EPOCHS" --threads "$THREADS" --seed "$SEED" --no-progress)

lscpu | grep -E "^Model name" || true
echo "flags: $(grep -o -w -E 'avx2|fma|f16c|avx512f|avx512_bf16|avx512_fp16|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')"
for p in fp32 bf16 fp16; do
  "$MIXPREC" "${common[@]}" --precision "$p" --log "$WORK/$p.jsonl" > "$WORK/$p.out" 2>&1
done
"$MIXPREC" "${common[@]}" --precision auto-layer --compute fp16 --policy-out "$WORK/policy.json" \
  --log "$WORK/auto.jsonl" > "$WORK/auto.out" 2>&1
grep "^autopilot:" "$WORK/auto.out" || true
# Overhead: the autopilot against a replay of its own policy, alternating.
for r in $(seq "$REPS"); do
  "$MIXPREC" "${common[@]}" --precision auto-layer --compute fp16 --log "$WORK/time-auto-$r.jsonl" > /dev/null 2>&1
  "$MIXPREC" "${common[@]}" --policy "$WORK/policy.json" --compute fp16 --log "$WORK/time-replay-$r.jsonl" > /dev/null 2>&1
done
python3 - "$WORK" "$REPS" <<'PY'
import json, statistics, sys
work, reps = sys.argv[1], int(sys.argv[2])
def epochs(path):
    return [json.loads(l) for l in open(path) if json.loads(l).get("type") == "epoch"]
def seconds(path):
    return sum(e["train_seconds"] for e in epochs(path))
rows = []
fp32_acc = epochs(f"{work}/fp32.jsonl")[-1]["test_accuracy"]
print(f"{'precision':<28}{'test accuracy':>14}{'vs fp32 (pp)':>14}{'skipped steps':>15}{'16-bit FLOPs':>14}")
for name, label in [("fp32", "fp32"), ("bf16", "bf16"), ("fp16", "fp16 (GradScaler)"), ("auto", "auto-layer --compute fp16")]:
    es = epochs(f"{work}/{name}.jsonl")
    last = es[-1]
    skipped = sum(e["skipped_steps"] for e in es)
    steps = last["optimizer_steps"] + skipped
    share = {"fp32": "0%", "bf16": "100%", "fp16": "100%"}.get(name, f"{100 * last.get('flops_16bit', -1):.1f}%")
    print(f"{label:<28}{last['test_accuracy']:>14.4f}{100 * (last['test_accuracy'] - fp32_acc):>+14.2f}"
          f"{skipped:>9} of {steps:<5}{share:>14}")
auto = [seconds(f"{work}/time-auto-{r}.jsonl") for r in range(1, reps + 1)]
replay = [seconds(f"{work}/time-replay-{r}.jsonl") for r in range(1, reps + 1)]
ma, mr = statistics.median(auto), statistics.median(replay)
print(f"training time, median of {reps}: autopilot {ma:.2f} s, replay of its policy {mr:.2f} s: "
      f"overhead {100 * (ma / mr - 1):+.2f}%")
print("final layer dtypes:", epochs(f"{work}/auto.jsonl")[-1].get("layer_dtypes"))
PY
