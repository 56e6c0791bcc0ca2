#!/usr/bin/env bash
# `mixprec train --precision auto-layer` (the precision autopilot) on sensor-mlp, whose first
# layer cannot compute in fp16: plain fp16 skips every step; the autopilot moves that layer (and
# only it) to bf16 after step 0, says so on stderr and in the JSONL log, and writes a policy file
# that --policy replays with no skipped step and no move. A resume continues the autopilot's
# state exactly (the same metrics as one uninterrupted run, no move repeated). Bad policy files
# and misplaced flags are refused before anything is written.
source "$(dirname "$0")/common.sh"
# --scheduler none: a cosine schedule spans the epochs asked for, so a run of 1 epoch resumed to 2
# would follow another schedule than a run of 2.
RUN=(--model sensor-mlp --limit-train 1280 --limit-test 500 --batch-size 64 --threads 1 --no-progress --seed 3
     --scheduler none)
check() {  # check NAME PYTHON-EXPRESSION-OVER-epochs/moves/header
  if python3 - "$2" "${@:3}" <<'PY'
import json, sys
expr, paths = sys.argv[1], sys.argv[2:]
def load(p):
    lines = [json.loads(l) for l in open(p)]
    return ([l for l in lines if l["type"] == "header"][0], [l for l in lines if l["type"] == "precision_move"],
            [l for l in lines if l["type"] == "epoch"])
runs = [load(p) for p in paths]
header, moves, epochs = runs[0]
sys.exit(0 if eval("(" + expr + ")") else 1)
PY
  then echo "ok   $1"; else echo "FAIL $1"; failures=$((failures + 1)); fi
}

"$MIXPREC" train "${RUN[@]}" --precision fp16 --epochs 1 --log "$WORK/fp16.jsonl" > /dev/null 2>&1 ||
  { echo "FAIL: fp16 run"; exit 1; }
check "plain fp16 skips every step on sensor-mlp" \
  'epochs[0]["skipped_steps"] == 20 and epochs[0]["optimizer_steps"] == 0' "$WORK/fp16.jsonl"

"$MIXPREC" train "${RUN[@]}" --precision auto-layer --compute fp16 --epochs 2 --log "$WORK/auto.jsonl" \
  --policy-out "$WORK/policy.json" --checkpoint-dir "$WORK/ckpt" > "$WORK/auto.err" 2>&1 ||
  { echo "FAIL: auto-layer run"; cat "$WORK/auto.err"; exit 1; }
grep -q "^autopilot: after step 0, layers.1 fp16 -> bf16: .*Inf/NaN from finite inputs" "$WORK/auto.err" &&
  echo "ok   the move is announced with its step and reason" ||
  { echo "FAIL: no announcement: $(cat "$WORK/auto.err")"; failures=$((failures + 1)); }
check "the log holds exactly that move, and the epochs train (1 skipped step) with all FLOPs in 16 bits" \
  'len(moves) == 1 and moves[0]["step"] == 0 and epochs[0]["nonfinite_losses"] == 1 and moves[0]["layer"] == "layers.1" and moves[0]["from"] == "fp16"
   and moves[0]["to"] == "bf16" and "65504" in moves[0]["reason"] and sum(e["skipped_steps"] for e in epochs) == 1
   and epochs[-1]["flops_16bit"] == 1.0 and epochs[-1]["layer_dtypes"] == "layers.1=bf16,layers.4=fp16,layers.6=fp16"
   and epochs[-1]["test_accuracy"] > 0.6 and header["autopilot"]["start"] == "fp16"' "$WORK/auto.jsonl"
python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "mixprec-layer-policy" and p["model"] == "sensor-mlp" and p["compute"] == "fp16"
assert p["layers"] == {"layers.1": "bf16", "layers.4": "fp16", "layers.6": "fp16"}, p["layers"]
assert [m["step"] for m in p["moves"]] == [0]
' "$WORK/policy.json" && echo "ok   --policy-out wrote the layers and the move" ||
  { echo "FAIL: policy file"; failures=$((failures + 1)); }

"$MIXPREC" train "${RUN[@]}" --policy "$WORK/policy.json" --compute fp16 --epochs 1 --log "$WORK/replay.jsonl" \
  > /dev/null 2>&1 || { echo "FAIL: replay"; exit 1; }
check "--policy replays it: no move, no skipped step" \
  'len(moves) == 0 and epochs[0]["skipped_steps"] == 0 and header["precision_resolved"] == "auto-layer"
   and header["autopilot"]["replaying"].endswith("policy.json") and epochs[0]["layer_dtypes"].startswith("layers.1=bf16")' \
  "$WORK/replay.jsonl"

# Resume after epoch 1 of 2: the same epoch 2 as the uninterrupted run, the move not repeated.
"$MIXPREC" train "${RUN[@]}" --precision auto-layer --compute fp16 --epochs 1 --checkpoint-dir "$WORK/half" \
  > /dev/null 2>&1 || { echo "FAIL: first half"; exit 1; }
"$MIXPREC" train --resume "$WORK/half" --epochs 2 --log "$WORK/resumed.jsonl" --no-progress > /dev/null 2>&1 ||
  { echo "FAIL: resume"; exit 1; }
check "a resume continues the autopilot exactly (epoch 2 bit-identical, one move)" \
  'len(moves) == 1 and all(runs[1][2][1][k] == epochs[1][k] for k in
   ("train_loss", "test_loss", "test_accuracy", "grad_norm_mean", "loss_scale", "skipped_steps", "layer_dtypes"))' \
  "$WORK/resumed.jsonl" "$WORK/auto.jsonl"

# Bad input: refused before training, nothing written.
printf '{"format": "mixprec-layer-policy", "version": 1, "compute": "fp16",\n "layers": {"layers.1": "bf16", "features.0": "fp32"}}\n' > "$WORK/unknown.json"
expect_failure policy_unknown_layer "names layer 'features.0', which model" \
  "$MIXPREC" train "${RUN[@]}" --policy "$WORK/unknown.json" --log "$WORK/never.jsonl" --checkpoint-dir "$WORK/never"
printf '{"format": "mixprec-layer-policy", "version": 1, "layers": {"layers.1": "fp9"}}\n' > "$WORK/dtype.json"
expect_failure policy_bad_dtype "layer 'layers.1': unknown dtype 'fp9'" \
  "$MIXPREC" train "${RUN[@]}" --policy "$WORK/dtype.json" --log "$WORK/never.jsonl" --checkpoint-dir "$WORK/never"
# fp8 is a policy dtype of the fp8 recipes only (docs/fp8.md), not one auto-layer moves layers to.
printf '{"format": "mixprec-layer-policy", "version": 1, "layers": {"layers.1": "fp8"}}\n' > "$WORK/fp8.json"
expect_failure policy_fp8_under_auto_layer "puts layer 'layers.1' in fp8, which only --precision fp8 or fp8-delayed runs" \
  "$MIXPREC" train "${RUN[@]}" --policy "$WORK/fp8.json" --log "$WORK/never.jsonl" --checkpoint-dir "$WORK/never"
echo '{ not json' > "$WORK/broken.json"
expect_failure policy_not_json "broken.json' is not valid JSON" \
  "$MIXPREC" train "${RUN[@]}" --policy "$WORK/broken.json" --log "$WORK/never.jsonl"
expect_failure policy_missing "missing.json" "$MIXPREC" train "${RUN[@]}" --policy "$WORK/missing.json"
expect_failure compute_without_auto_layer "--compute sets the dtype --precision auto-layer" \
  "$MIXPREC" train "${RUN[@]}" --precision fp16 --compute fp16
expect_failure unknown_compute "unknown --compute 'fp8'" "$MIXPREC" train "${RUN[@]}" --precision auto-layer --compute fp8
expect_failure policy_out_without_auto_layer "--policy-out writes" \
  "$MIXPREC" train "${RUN[@]}" --precision bf16 --policy-out "$WORK/p.json"
touch "$WORK/file"
expect_failure policy_out_unwritable "$WORK/file/p.json" "$MIXPREC" train "${RUN[@]}" --precision auto-layer \
  --policy-out "$WORK/file/p.json" --log "$WORK/never.jsonl" --checkpoint-dir "$WORK/never"
[ ! -e "$WORK/never.jsonl" ] && [ ! -e "$WORK/never" ] && echo "ok   nothing written after the refusals" ||
  { echo "FAIL: a log or checkpoint was written after a refusal"; failures=$((failures + 1)); }
finish
