#!/usr/bin/env bash
# Preemption-safe training (docs/training.md, "Preemption and periodic checkpoints"):
# - SIGTERM (or SIGINT) at a random moment stops the run at the next step boundary with a
#   checkpoint, exit status 128 + signal and a line saying how to resume; the resumed run ends
#   bit for bit like an uninterrupted one (every logged metric and the final weights and
#   optimizer state, byte for byte) in fp32, bf16 and fp16 (whose scale grows and skips);
# - a second signal exits at once, even mid-write, and --resume takes the newest complete
#   checkpoint (never a half-written or manifest-less directory);
# - kill -9, then --resume from the newest periodic (mid-epoch) checkpoint: bit-identical;
# - a checkpoint that cannot be written (file size limit: EFBIG; a file in the way) fails with
#   a message naming the problem and the previous checkpoint, which still loads.
# Exit statuses >= 128 are expected here, so they are checked by hand, not with expect_failure.
source "$(dirname "$0")/common.sh"
[ -d "$DATA_DIR" ] || { echo "FAIL: $DATA_DIR is missing (Debian package dataset-fashion-mnist)"; exit 1; }

RUN=(--model mlp --epochs 3 --limit-train 30000 --limit-test 1000 --threads 1 --no-progress --seed 7
     --checkpoint-every-steps 50)
fail() { echo "FAIL $*"; failures=$((failures + 1)); }

# Waits (up to 60 s) until a file matching PATTERN (a path or a glob) exists or process PID has
# ended.
wait_for() {
  local pattern="$1" pid="$2"
  for _ in $(seq 1 1200); do
    compgen -G "$pattern" > /dev/null && return 0
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# compare NAME REF_DIR REF_LOG OTHER_DIR OTHER_LOG: every epoch line's metrics except timing and
# memory, and the final checkpoint's tensors byte for byte.
compare() {
  local name="$1"
  python3 - "$3" "$5" <<'PY' || { fail "$name: the metrics differ"; return; }
import json, sys
SKIP = {"samples_per_second", "train_seconds", "eval_seconds", "peak_memory_bytes", "block_cache"}
def epochs(path):
    rows = [json.loads(l) for l in open(path)]
    assert rows[0]["type"] == "header", path
    return [r for r in rows[1:] if r["type"] == "epoch"]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
assert [r["epoch"] for r in a] == [1, 2, 3], [r["epoch"] for r in a]
assert [r["epoch"] for r in b] == [1, 2, 3], [r["epoch"] for r in b]
for x, y in zip(a, b):
    for key in sorted(set(x) - SKIP):
        if x[key] != y[key]:
            sys.exit(f"epoch {x['epoch']} {key}: uninterrupted {x[key]!r}, resumed {y[key]!r}")
PY
  # The running sums of the periodic checkpoints both runs kept: a last-bit difference there
  # (sums recovered as mean x count) is often rounded away in the epoch's final mean.
  python3 - "$2" "$4" <<'PY' || { fail "$name: the periodic checkpoints' partial sums differ"; return; }
import json, os, sys
a, b = sys.argv[1], sys.argv[2]
for name in sorted(set(os.listdir(a)) & set(os.listdir(b))):
    if "-step-" not in name or name.startswith("."):
        continue
    x, y = (json.load(open(os.path.join(d, name, "state.json"))).get("partial_sums") for d in (a, b))
    if x != y:
        sys.exit(f"{name}: uninterrupted {x}, resumed {y}")
PY
  local f
  for f in model.safetensors optimizer.safetensors; do
    cmp -s "$2/epoch-0003/$f" "$4/epoch-0003/$f" || { fail "$name: epoch-0003/$f differs"; return; }
  done
  echo "ok   $name: bit-identical to the uninterrupted run (metrics, weights, optimizer state)"
}

# A random moment after training began: the first periodic checkpoint proves the handlers are
# installed (Trainer::run), then 0-1.2 s more.
# A pause of 0 to 40% of MS milliseconds (the uninterrupted run's time on this machine), so the
# signal lands inside the run on any CPU: on a Zen 5 the whole run takes under a second.
random_pause() { sleep "$(awk -v r="$RANDOM" -v ms="$1" 'BEGIN { printf "%.3f", (r % 40) / 100 * ms / 1000 }')"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

for PRECISION in fp32 bf16 fp16; do
  EXTRA=(--precision "$PRECISION")
  # fp16: a small growth interval, so the scale grows and overflows (skipped steps) many times.
  [ "$PRECISION" = fp16 ] && EXTRA+=(--scaler-growth-interval 5)
  SIG=TERM; [ "$PRECISION" = fp32 ] && SIG=INT
  REF="$WORK/ref-$PRECISION"
  t0=$(now_ms)
  "$MIXPREC" train "${RUN[@]}" "${EXTRA[@]}" --checkpoint-dir "$REF" --log "$REF.jsonl" > /dev/null ||
    { fail "$PRECISION: uninterrupted run"; continue; }
  ref_ms=$(( $(now_ms) - t0 ))
  if [ "$(grep -c '"type":"epoch"' "$REF.jsonl")" -ne 3 ]; then
    fail "$PRECISION: the log has $(grep -c '"type":"epoch"' "$REF.jsonl") epoch lines, not 3 (periodic checkpoints add none)"
  fi
  ls "$REF" | grep -q -- '-step-' || fail "$PRECISION: no periodic checkpoint among $(ls "$REF" | tr '\n' ' ')"
  if [ "$PRECISION" = fp16 ]; then
    python3 - "$REF.jsonl" <<'PY' || fail "fp16: the scaler neither skipped nor grew"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
assert sum(r["skipped_steps"] for r in rows) > 0 and max(r["loss_scale"] for r in rows) > 65536, rows
PY
  fi

  # Interrupted at a random moment, then resumed with the command the message gives.
  RUN_DIR="$WORK/sig-$PRECISION"
  "$MIXPREC" train "${RUN[@]}" "${EXTRA[@]}" --checkpoint-dir "$RUN_DIR" --log "$RUN_DIR.jsonl" \
    > /dev/null 2> "$RUN_DIR.err" &
  pid=$!
  wait_for "$RUN_DIR/epoch-0000-step-00000050/MANIFEST.json" "$pid" || { fail "$PRECISION: no first periodic checkpoint"; wait "$pid"; continue; }
  random_pause "$ref_ms"
  kill -"$SIG" "$pid"
  wait "$pid"
  status=$?
  want=143; [ "$SIG" = INT ] && want=130
  [ "$status" -eq "$want" ] || { fail "$PRECISION: SIG$SIG gave exit status $status, not $want: $(cat "$RUN_DIR.err")"; continue; }
  message="$(cat "$RUN_DIR.err")"
  if ! grep -q "^mixprec: SIG$SIG: stopped after optimizer step [0-9]* (epoch [123] of 3) and saved checkpoint '$RUN_DIR/epoch-000[0-2]\(-step-[0-9]*\)\?'; resume with: mixprec train --resume $RUN_DIR\$" <<<"$message"; then
    fail "$PRECISION: unexpected message: $message"; continue
  fi
  echo "ok   $PRECISION: SIG$SIG -> status $status: $message"
  resume_cmd="${message##*resume with: }"
  # shellcheck disable=SC2086  # the printed command, word for word
  "$MIXPREC" ${resume_cmd#mixprec } > /dev/null || { fail "$PRECISION: $resume_cmd"; continue; }
  compare "$PRECISION: SIG$SIG + --resume" "$REF" "$REF.jsonl" "$RUN_DIR" "$RUN_DIR.jsonl"
done

# --- A second signal exits at once; --resume takes the newest complete checkpoint. -------------
# A checkpoint every step, so that the process is writing one most of the time: the second
# SIGTERM typically lands in the middle of a write.
# Two SIGTERMs sent back to back can merge into one (a signal already pending is not queued
# again), so the second follows after a short, varying gap; an attempt where it came only after
# the process had finished anyway is repeated.
REF="$WORK/ref-fp16"
second=""
for gap in 0.003 0.01 0.001 0.02 0.005; do
  D="$WORK/twice-$gap"
  "$MIXPREC" train "${RUN[@]}" --precision fp16 --scaler-growth-interval 5 --checkpoint-every-steps 1 \
    --checkpoint-dir "$D" --log "$D.jsonl" > /dev/null 2> "$D.err" &
  pid=$!
  # Any complete checkpoint: with one per step and only the newest 3 kept, a given one can be
  # written and pruned between two polls on a fast CPU.
  wait_for "$D/epoch-*/MANIFEST.json" "$pid" || { fail "second SIGTERM: no first checkpoint"; wait "$pid"; break; }
  sleep "$(awk -v r="$RANDOM" 'BEGIN { printf "%.2f", (r % 30) / 100 }')"
  kill -TERM "$pid"; sleep "$gap"; kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  status=$?
  [ "$status" -eq 143 ] || { fail "second SIGTERM: status $status, stderr: $(cat "$D.err")"; break; }
  if grep -q "^mixprec: second SIGTERM: exiting at once (status 143)" "$D.err"; then second="$D"; break; fi
  grep -q "^mixprec: SIGTERM: stopped after" "$D.err" || { fail "second SIGTERM: stderr: $(cat "$D.err")"; break; }
done
if [ -n "$second" ]; then
  D="$second"
  echo "ok   second SIGTERM: status 143 at once; left behind: $(ls -A "$D" | tr '\n' ' ')"
  # A directory that looks newer but has no manifest (a save that never finished) is skipped.
  mkdir -p "$D/epoch-9999-step-99999999" && echo torn > "$D/epoch-9999-step-99999999/model.safetensors"
  if "$MIXPREC" train --resume "$D" --checkpoint-every-steps 50 > /dev/null 2> "$D.resume.err"; then
    compare "second SIGTERM + --resume" "$REF" "$REF.jsonl" "$D" "$D.jsonl"
    grep -q '"resumed_from":"[^"]*epoch-9999' "$D.jsonl" && fail "resumed from the manifest-less directory"
  else
    fail "--resume after a second SIGTERM: $(cat "$D.resume.err")"
  fi
else
  fail "second SIGTERM: in no attempt did the second signal arrive before the process had finished"
fi

# --- kill -9, then --resume from the newest periodic checkpoint. --------------------------------
REF="$WORK/ref-bf16"
D="$WORK/killed"
"$MIXPREC" train "${RUN[@]}" --precision bf16 --checkpoint-dir "$D" --log "$D.jsonl" > /dev/null &
pid=$!
# 235 steps per epoch: step 250 is inside epoch 2.
if wait_for "$D/epoch-0001-step-00000250/MANIFEST.json" "$pid"; then
  kill -9 "$pid"; wait "$pid" 2>/dev/null
  newest="$(ls "$D" | grep -v '^\.' | sort | tail -n 1)"
  case "$newest" in
    *-step-*) echo "ok   killed with SIGKILL; newest checkpoint $newest" ;;
    *) fail "SIGKILL: the newest checkpoint $newest is not a periodic one" ;;
  esac
  if "$MIXPREC" train --resume "$D" > /dev/null; then
    compare "SIGKILL + --resume from $newest" "$REF" "$REF.jsonl" "$D" "$D.jsonl"
  else
    fail "--resume after SIGKILL"
  fi
else
  fail "SIGKILL: no checkpoint at step 250"; wait "$pid"
fi

# --- Checkpoints that cannot be written. ------------------------------------------------------
SMALL=(--model mlp --precision bf16 --limit-train 2000 --limit-test 500 --threads 1 --no-progress)
D="$WORK/full"
"$MIXPREC" train "${SMALL[@]}" --epochs 1 --checkpoint-dir "$D" > /dev/null || fail "disk full: first epoch"
# A file size limit of 200 KiB (the model file is ~920 KiB): write() fails with EFBIG once
# SIGXFSZ is ignored, as it does with ENOSPC on a full disk.
expect_failure "checkpoint over the file size limit" \
  "File too large.*the previous checkpoint '$D/epoch-0001' is intact" \
  bash -c 'ulimit -f 200; trap "" XFSZ; exec "$@"' _ "$MIXPREC" train --resume "$D" --epochs 2
# No half-written checkpoint stays behind (the run's .mixprec-lock may).
[ "$(ls -A "$D" | grep -v '^\.mixprec-lock$')" = "epoch-0001" ] || fail "disk full: left behind: $(ls -A "$D" | tr '\n' ' ')"
"$MIXPREC" eval --checkpoint "$D" > /dev/null || fail "disk full: the previous checkpoint no longer loads"
# A file where the next checkpoint directory goes.
echo "not a directory" > "$D/epoch-0002"
expect_failure "a file in the way of the checkpoint" \
  "epoch-0002': exists and is not a directory.*the previous checkpoint '$D/epoch-0001' is intact" \
  "$MIXPREC" train --resume "$D" --epochs 2
"$MIXPREC" eval --checkpoint "$D/epoch-0001" > /dev/null || fail "file in the way: the previous checkpoint no longer loads"
rm "$D/epoch-0002"
"$MIXPREC" train --resume "$D" --epochs 2 > /dev/null && [ -f "$D/epoch-0002/MANIFEST.json" ] ||
  fail "resuming once the way is clear"

# Without --checkpoint-dir, the message says that nothing was saved.
# 50 epochs: far longer than the 0.3 s it runs on any CPU before the signal.
"$MIXPREC" train "${SMALL[@]}" --limit-train 30000 --epochs 50 > "$WORK/none.out" 2> "$WORK/none.err" &
pid=$!
# The "train:" line comes right before Trainer::run installs the handlers; then 0.3 s of training.
for _ in $(seq 1 600); do grep -q '^train:' "$WORK/none.out" && break; sleep 0.05; done
sleep 0.3
kill -TERM "$pid"; wait "$pid"; status=$?
if [ "$status" -eq 143 ] && grep -q "nothing was saved (no --checkpoint-dir)" "$WORK/none.err"; then
  echo "ok   SIGTERM without --checkpoint-dir: $(cat "$WORK/none.err")"
else
  fail "SIGTERM without --checkpoint-dir: status $status, stderr: $(cat "$WORK/none.err")"
fi
finish
