#!/usr/bin/env bash
# `mixprec train --tensorboard DIR`: the event files load in the real tensorboard package
# (tests/python/tensorboard_check.py) with the per-step scalars, the JSONL log's epoch values,
# the histograms and the precision-range text, for an fp16 run whose scaler skips steps; a
# resumed run adds its own event file; an unwritable directory is refused before training (no
# log, no checkpoint written). Skipped (exit 77) when tensorboard is missing, unless
# MIXPREC_REQUIRE_PYTHON_TESTS=1 (CI): see require_python_packages in common.sh.
source "$(dirname "$0")/common.sh"
require_python_packages "tensorboard, numpy" "tensorboard numpy"
CHECK="$(dirname "$0")/../python/tensorboard_check.py"
RUN=(--model mlp --precision fp16 --scaler-growth-interval 1 --limit-train 640 --limit-test 100
     --batch-size 64 --threads 1 --no-progress --histogram-every 4)
"$MIXPREC" train "${RUN[@]}" --epochs 2 --tensorboard "$WORK/tb" --log "$WORK/run.jsonl" \
  --checkpoint-dir "$WORK/ckpt" > /dev/null || { echo "FAIL: training"; exit 1; }
"$PY" "$CHECK" "$WORK/tb" "$WORK/run.jsonl" 4 || failures=$((failures + 1))

"$MIXPREC" train --resume "$WORK/ckpt" --epochs 3 --no-progress > /dev/null || { echo "FAIL: resume"; exit 1; }
files=$(ls "$WORK/tb" | grep -c tfevents)
[ "$files" -eq 2 ] && echo "ok   the resumed run wrote a second event file into the same directory" ||
  { echo "FAIL: $files event files after the resume"; failures=$((failures + 1)); }

touch "$WORK/file"
expect_failure unwritable_tensorboard "$WORK/file/tb" "$MIXPREC" train "${RUN[@]}" --epochs 1 \
  --tensorboard "$WORK/file/tb" --log "$WORK/never.jsonl" --checkpoint-dir "$WORK/never"
[ ! -e "$WORK/never.jsonl" ] && [ ! -e "$WORK/never" ] && echo "ok   nothing written after the refusal" ||
  { echo "FAIL: a log or checkpoint was written after the refusal"; failures=$((failures + 1)); }
finish
