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
finish
