#!/usr/bin/env bash
# dist.data_parallel: `mpirun -np N mixprec train` against one process on the same global batch.
#  - fp32, 2 and 3 ranks: the same train and test losses per epoch to a relative 1e-6, and the
#    same accuracy (the ranks' shards make up the single process's batch; only the order of the
#    f32 additions of the gradient mean differs);
#  - fp16 with a scaler that grows after every clean step (so it overflows and skips): the same
#    skipped steps and the same scale per epoch as one process, on 2 ranks;
#  - --precision auto-layer on sensor-mlp: 2 ranks make the same layer moves at the same steps
#    as one process (the ranks combine their statistics before deciding), and rank 0 writes
#    the policy;
#  - bad input: a batch size the ranks cannot share, and pure-bf16, refused on every rank with a
#    non-zero exit and no hang.
# Usage: data_parallel.sh MPIRUN MIXPREC
set -uo pipefail
MPIRUN=$1 MIXPREC=$2
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
BASE=(--model mlp --limit-train 768 --limit-test 300 --batch-size 96 --epochs 2 --threads 1
      --no-progress --scheduler none --seed 4)

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

# The precision autopilot: one process and 2 ranks see the same global batch, so the combined
# statistics make the same moves (layers.1 overflows fp16 at step 0 on the raw sensor counts).
AUTO=(--model sensor-mlp --limit-train 768 --limit-test 300 --batch-size 96 --epochs 2 --threads 1
      --no-progress --scheduler none --seed 4 --precision auto-layer --compute fp16)
run auto_one 1 "${AUTO[@]}"
run auto_two 2 "${AUTO[@]}" --policy-out "$WORK/auto_two.policy.json"
python3 - "$WORK/auto_one.jsonl" "$WORK/auto_two.jsonl" "$WORK/auto_two.policy.json" <<'PY' || failures=$((failures + 1))
import json, sys
def moves(path):
    return [(l["step"], l["layer"], l["from"], l["to"]) for l in map(json.loads, open(path)) if l["type"] == "precision_move"]
one, two = moves(sys.argv[1]), moves(sys.argv[2])
assert one and one == two, f"moves differ: one process {one}, 2 ranks {two}"
assert ("layers.1", "bf16") in [(m[1], m[3]) for m in two], two
last = [json.loads(l) for l in open(sys.argv[2]) if json.loads(l)["type"] == "epoch"][-1]
policy = json.load(open(sys.argv[3]))
assert ",".join(f"{k}={v}" for k, v in policy["layers"].items()) == last["layer_dtypes"], (policy, last["layer_dtypes"])
print("ok   auto-layer on 2 ranks made the moves of one process:", two)
PY

expect_refusal batch_not_divisible "does not divide among 3 ranks" 3 "${BASE[@]}" --batch-size 64
expect_refusal pure_bf16 "do not average yet" 2 "${BASE[@]}" --precision pure-bf16

finish
