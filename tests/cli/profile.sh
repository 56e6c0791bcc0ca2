#!/usr/bin/env bash
# `mixprec profile` on the small MLP: a per-op table with the roofline header, and valid JSON with
# the documented keys. Nothing about timings is asserted.
source "$(dirname "$0")/common.sh"
RUN=(profile --model mlp --steps 2 --warmup 1 --threads 1)

if "$MIXPREC" "${RUN[@]}" --precision bf16 > "$WORK/table.txt" 2> "$WORK/err.txt"; then
  check table_header "op  *phase  *dtype  *count  *total ms  *share%  *GFLOP/s  *bytes  *FLOP/B  *verdict  *roof%" "$WORK/table.txt"
  check table_peaks "ridge" "$WORK/table.txt"
  check table_linear "^linear  *forward  *bf16" "$WORK/table.txt"
  check table_backward "^linear  *backward  *bf16" "$WORK/table.txt"
  check table_optimizer "^Adam  *optimizer  *f32" "$WORK/table.txt"
  check table_verdict "bound" "$WORK/table.txt"
  check table_casts "^casts: [1-9][0-9]* dtype casts" "$WORK/table.txt"
  check table_lower "could run lower" "$WORK/table.txt"
else
  echo "FAIL table: exit status $?: $(cat "$WORK/err.txt")"; failures=$((failures + 1))
fi

if "$MIXPREC" "${RUN[@]}" --precision fp32 --json > "$WORK/out.json" 2> "$WORK/err.txt"; then
  if python3 - "$WORK/out.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
for key in ["model", "precision", "batch_size", "threads", "steps", "warmup", "machine", "wall_ms",
            "recorded_ms", "unattributed_ms", "ops", "casts", "could_run_lower", "could_run_lower_ms"]:
    assert key in j, key
for key in ["peak_gflops", "peak_gbytes_per_s", "ridge_flop_per_byte"]:
    assert key in j["machine"], key
assert j["model"] == "mlp" and j["steps"] == 2
ops = {(o["op"], o["phase"]) for o in j["ops"]}
assert ("linear", "forward") in ops and ("linear", "backward") in ops, ops
assert any(c["op"] == "linear" for c in j["could_run_lower"]), j["could_run_lower"]
PY
  then echo "ok   json"; else echo "FAIL json"; failures=$((failures + 1)); fi
else
  echo "FAIL json: exit status $?: $(cat "$WORK/err.txt")"; failures=$((failures + 1))
fi
# Remembered peaks: the first run writes the file and says where the floor's peaks came from; a
# damaged file is one warning, the run goes on and the file is replaced; off remembers nothing.
PEAKS="$WORK/cache/peaks.json"
if MIXPREC_PEAKS_FILE="$PEAKS" "$MIXPREC" "${RUN[@]}" --precision bf16 > "$WORK/remembered.txt" 2> "$WORK/err.txt"; then
  check remembered_copy "^  copy  *[0-9.]* GB/s (best remembered; this run [0-9.]* GB/s, $PEAKS)" "$WORK/remembered.txt"
  check remembered_bf16 "^  bf16 GEMM [0-9.]* GFLOP/s (best remembered; this run" "$WORK/remembered.txt"
  check remembered_file '"copy_gbytes_per_s bytes=67108864"' "$PEAKS"
else
  echo "FAIL remembered: exit status $?: $(cat "$WORK/err.txt")"; failures=$((failures + 1))
fi
echo '{"format": "mixprec machine peaks", "version": 1, "machines": {' > "$PEAKS"
if MIXPREC_PEAKS_FILE="$PEAKS" "$MIXPREC" "${RUN[@]}" --json > "$WORK/damaged.json" 2> "$WORK/err.txt"; then
  check damaged_warning "^mixprec: warning: machine peaks: '$PEAKS' is not valid JSON" "$WORK/err.txt"
  [ "$(wc -l < "$WORK/err.txt")" -eq 1 ] && echo "ok   damaged_one_line" ||
    { echo "FAIL damaged_one_line: $(cat "$WORK/err.txt")"; failures=$((failures + 1)); }
  if python3 - "$WORK/damaged.json" "$PEAKS" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))["machine"]
assert m["peaks_file"] == sys.argv[2], m
assert m["peak_gbytes_per_s"] == m["peak_gbytes_per_s_measured"], m  # nothing usable was remembered
assert json.load(open(sys.argv[2]))["version"] == 1  # replaced with a good file
PY
  then echo "ok   damaged_replaced"; else echo "FAIL damaged_replaced"; failures=$((failures + 1)); fi
else
  echo "FAIL damaged: exit status $?: $(cat "$WORK/err.txt")"; failures=$((failures + 1))
fi
if "$MIXPREC" "${RUN[@]}" > "$WORK/off.txt" 2> "$WORK/err.txt"; then
  check off_says_so "^  copy  *[0-9.]* GB/s (this run; not remembered)" "$WORK/off.txt"
else
  echo "FAIL off: exit status $?: $(cat "$WORK/err.txt")"; failures=$((failures + 1))
fi
finish
