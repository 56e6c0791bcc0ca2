#!/usr/bin/env bash
# A run killed with SIGKILL in the middle of an epoch and resumed from its checkpoint directory
# ends with exactly the metrics (loss, accuracy, macro-F1, bit for bit as printed in the JSONL
# log) of an uninterrupted run.
source "$(dirname "$0")/common.sh"
PRECISION="${2:-bf16}"
RUN=(--model mlp --precision "$PRECISION" --epochs 3 --limit-train 20000 --limit-test 2000 --threads 1
     --no-progress --seed 7)

"$MIXPREC" train "${RUN[@]}" --log "$WORK/straight.jsonl" > /dev/null || { echo "FAIL: straight run"; exit 1; }

"$MIXPREC" train "${RUN[@]}" --log "$WORK/killed.jsonl" --checkpoint-dir "$WORK/ckpt" > /dev/null &
pid=$!
# Kill as soon as the first checkpoint is complete, i.e. while epoch 2 is running.
for _ in $(seq 1 600); do
  [ -f "$WORK/ckpt/epoch-0001/MANIFEST.json" ] && break
  sleep 0.05
done
kill -9 "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
[ -f "$WORK/ckpt/epoch-0001/MANIFEST.json" ] || { echo "FAIL: no checkpoint before the kill"; exit 1; }
if [ -f "$WORK/ckpt/epoch-0003/MANIFEST.json" ]; then
  echo "FAIL: the run finished before it could be killed; make the epochs longer"; exit 1
fi
echo "killed during epoch 2; checkpoints: $(ls "$WORK/ckpt" | tr '\n' ' ')"

"$MIXPREC" train --resume "$WORK/ckpt" > "$WORK/resumed.txt" || { echo "FAIL: resume"; cat "$WORK/resumed.txt"; exit 1; }
python3 - "$WORK/straight.jsonl" "$WORK/killed.jsonl" <<'PY' || failures=$((failures + 1))
import json, sys
def epochs(path):
    rows = [json.loads(l) for l in open(path)]
    assert rows[0]["type"] == "header", path
    return {r["epoch"]: r for r in rows[1:] if r["type"] == "epoch"}
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
assert sorted(a) == [1, 2, 3] and sorted(b) == [1, 2, 3], (sorted(a), sorted(b))
for e in (1, 2, 3):
    for key in ("train_loss", "test_loss", "test_accuracy", "macro_f1", "optimizer_steps", "loss_scale", "skipped_steps", "grad_norm_mean", "lr"):
        if a[e][key] != b[e][key]:
            sys.exit(f"FAIL epoch {e} {key}: uninterrupted {a[e][key]!r} vs resumed {b[e][key]!r}")
print("ok   resumed run matches the uninterrupted one:", {k: a[3][k] for k in ("train_loss", "test_accuracy", "macro_f1")})
PY
finish
