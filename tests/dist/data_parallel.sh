#!/usr/bin/env bash
# dist.data_parallel: `mpirun -np N mixprec train` against one process on the same global batch.
#  - fp32, 2 and 3 ranks: the same train and test losses per epoch to a relative 1e-6, and the
#    same accuracy (the ranks' shards make up the single process's batch; only the order of the
#    f32 additions of the gradient mean differs);
#  - fp16 with a scaler that grows after every clean step (so it overflows and skips): the same
#    skipped steps and the same scale per epoch as one process, on 2 ranks;
#  - bad input: a batch size the ranks cannot share, and pure-bf16, refused on every rank with a
#    non-zero exit and no hang.
# Usage: data_parallel.sh MPIRUN MIXPREC
set -uo pipefail
MPIRUN=$1 MIXPREC=$2
source "$(dirname "${BASH_SOURCE[0]}")/mpirun_flags.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
BASE=(--model mlp --limit-train 768 --limit-test 300 --batch-size 96 --epochs 2 --threads 1
      --no-progress --scheduler none --seed 4)

run() {  # run NAME NP ARGS...: one process when NP is 1, else mpirun
  local name=$1 np=$2
  shift 2
  if [ "$np" -eq 1 ]; then
    "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" > "$WORK/$name.out" 2>&1
  else
    timeout 300 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" \
      > "$WORK/$name.out" 2>&1
  fi
  local status=$?
  if [ "$status" -ne 0 ]; then echo "FAIL $name: exit $status"; cat "$WORK/$name.out"; failures=$((failures + 1)); fi
}

compare() {  # compare A B KEYS TOLERANCE
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$4" <<'PY' || failures=$((failures + 1))
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][1:]
b = [json.loads(l) for l in open(sys.argv[2])][1:]
keys, tol = sys.argv[3].split(","), float(sys.argv[4])
assert len(a) == len(b) and a, f"epochs: {len(a)} vs {len(b)}"
bad = []
for x, y in zip(a, b):
    for k in keys:
        rel = abs(x[k] - y[k]) / max(abs(x[k]), 1e-30)
        if rel > tol:
            bad.append(f"epoch {x['epoch']} {k}: {x[k]} vs {y[k]} (rel {rel:.2e})")
name = sys.argv[2].rsplit("/", 1)[-1]
if bad:
    print("FAIL", name, "; ".join(bad))
    sys.exit(1)
print("ok  ", name, "matches one process on", ",".join(keys), "within", tol)
PY
}

run one 1 "${BASE[@]}" --precision fp32
run two 2 "${BASE[@]}" --precision fp32
run three 3 "${BASE[@]}" --precision fp32
compare one two train_loss,test_loss,test_accuracy,grad_norm_mean 1e-6
compare one three train_loss,test_loss,test_accuracy,grad_norm_mean 1e-6
grep -q '"ranks":2' "$WORK/two.jsonl" && echo "ok   the log says 2 ranks" ||
  { echo "FAIL the log header lacks ranks 2"; failures=$((failures + 1)); }

# fp16: a scaler that doubles after every clean step overflows again and again, so steps get
# skipped and the scale backs off; both must happen identically on every rank and in one process.
FP16=("${BASE[@]}" --precision fp16 --scaler-growth-interval 1)
run one16 1 "${FP16[@]}"
run two16 2 "${FP16[@]}"
compare one16 two16 skipped_steps,loss_scale 0
python3 -c "
import json,sys
h=[json.loads(l) for l in open('$WORK/one16.jsonl')][1:]
n=sum(e['skipped_steps'] for e in h); print('ok   fp16 skipped', n, 'steps') if n > 0 else print('FAIL fp16 skipped no step'); sys.exit(0 if n > 0 else 1)" ||
  failures=$((failures + 1))

expect_refusal() {  # NAME PATTERN NP ARGS...
  local name=$1 pattern=$2 np=$3
  shift 3
  local out status
  out=$(timeout 120 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "$@" 2>&1)
  status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $status: $(grep -m1 mixprec <<<"$out")"; failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -m1 'mixprec:' <<<"$out")"
  fi
}
expect_refusal batch_not_divisible "does not divide among 3 ranks" 3 "${BASE[@]}" --batch-size 64
expect_refusal pure_bf16 "do not average yet" 2 "${BASE[@]}" --precision pure-bf16

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
