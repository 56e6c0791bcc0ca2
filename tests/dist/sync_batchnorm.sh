#!/usr/bin/env bash
# dist.sync_batchnorm: `mpirun -np 2 mixprec train --model cnn --sync-batchnorm` (two BatchNorm2d
# layers) against one process on the same global batch, fp32:
#  - with --sync-batchnorm the train and test losses of an epoch match one process within a
#    relative 1e-5, and the accuracy is the same;
#  - without it each rank normalises with its own half batch: the losses differ by more than
#    1e-4, so the flag is what makes the ranks agree;
#  - with --shard-optimizer (ZeRO-1) too, the same run bit for bit;
#  - one process with --sync-batchnorm is the same run, bit for bit (the flag is a no-op);
#  - a one-process checkpoint resumed on 2 ranks with --sync-batchnorm is accepted (the flag
#    is not part of the resume check) and continues the one-process run within 1e-5;
#  - the log header counts the synchronised layers.
# Why one epoch of SGD: BatchNorm itself agrees to f32 roundings (bit for bit on the reference
# kernels: tests/dist/test_sync_batchnorm.cpp), but each convolution weight's gradient is a sum
# of 50176 products that the ranks split in two, so it differs by ~5e-6 relative from one
# process's. Training amplifies that: ReLU and max-pool decisions flip, and Adam turns the
# gradient elements that are mostly rounding noise into full-size steps of either sign. Over two
# epochs of Adam the losses drift apart by up to ~1e-3 depending on the seed, about as far as one
# process on the cpu kernels drifts from one process on the reference kernels (7.9e-5 at epoch 2
# with seed 4); one epoch of SGD at lr 0.01 stays within 3e-8..3e-6 over seeds 4 to 7.
# Usage: sync_batchnorm.sh MPIRUN MIXPREC
set -uo pipefail
MPIRUN=$1 MIXPREC=$2
source "$(dirname "${BASH_SOURCE[0]}")/train_lib.sh"
BASE=(--model cnn --limit-train 384 --limit-test 200 --batch-size 64 --threads 1 --no-progress
      --scheduler none --seed 4 --precision fp32 --optimizer sgd --lr 0.01)

differences() {  # differences A B KEYS [MIN]: prints the per-epoch relative differences; with MIN,
                 # fails unless some key of some epoch differs by more than MIN
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "${4:-}" <<'PY' || failures=$((failures + 1))
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][1:]
b = [json.loads(l) for l in open(sys.argv[2])][1:]
rels = [(x["epoch"], k, abs(x[k] - y[k]) / max(abs(x[k]), 1e-30))
        for x, y in zip(a, b) for k in sys.argv[3].split(",")]
text = "; ".join(f"epoch {e} {k} {r:.1e}" for e, k, r in rels)
name = sys.argv[1].rsplit("/", 1)[-1] + " vs " + sys.argv[2].rsplit("/", 1)[-1]
if sys.argv[4] and max(r for _, _, r in rels) <= float(sys.argv[4]):
    print("FAIL", name, "agree although they should not:", text)
    sys.exit(1)
print("ok  " if sys.argv[4] else "    ", name, ("differ by more than " + sys.argv[4] + ":") if sys.argv[4] else "observed:", text)
PY
}

run one 1 "${BASE[@]}" --epochs 1
run two_sync 2 "${BASE[@]}" --epochs 1 --sync-batchnorm
run two_plain 2 "${BASE[@]}" --epochs 1
compare one two_sync train_loss,test_loss 1e-5
compare one two_sync test_accuracy 0
differences one two_sync train_loss,test_loss
differences one two_plain train_loss,test_loss 1e-4
python3 - "$WORK/two_sync.jsonl" "$WORK/two_plain.jsonl" <<'PY' || failures=$((failures + 1))
import json, sys
sync, plain = (json.loads(open(p).readline()) for p in sys.argv[1:])
ok = (sync.get("sync_batchnorm_layers") == 2 and sync["config"]["sync_batchnorm"] is True and
      "sync_batchnorm_layers" not in plain and plain["config"]["sync_batchnorm"] is False)
print("ok   the log header says 2 synchronised layers" if ok else
      f"FAIL log headers: {sync.get('sync_batchnorm_layers')} / {plain.get('sync_batchnorm_layers')}")
sys.exit(0 if ok else 1)
PY

# With ZeRO-1 the same gradients are reduced, only the optimizer state is sharded: bit for bit.
run two_sync_zero 2 "${BASE[@]}" --epochs 1 --sync-batchnorm --shard-optimizer
compare two_sync two_sync_zero train_loss,test_loss,test_accuracy 0

# One process: accepted, and changes nothing.
run one_flag 1 "${BASE[@]}" --epochs 1 --sync-batchnorm
compare one one_flag train_loss,test_loss,test_accuracy,grad_norm_mean 0

# A one-process run continued on 2 ranks with synchronised statistics.
run one2 1 "${BASE[@]}" --epochs 2
run first 1 "${BASE[@]}" --epochs 1 --checkpoint-dir "$WORK/ck"
run resumed 2 --resume "$WORK/ck" --epochs 2 --sync-batchnorm --no-progress
compare one2 resumed train_loss,test_loss 1e-5
differences one2 resumed train_loss,test_loss
grep -q '"resumed_from":"' "$WORK/resumed.jsonl" && grep -q '"sync_batchnorm":true' "$WORK/resumed.jsonl" ||
  { echo "FAIL the resumed log lacks resumed_from or sync_batchnorm"; failures=$((failures + 1)); }

finish
