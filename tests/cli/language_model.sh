#!/usr/bin/env bash
# `mixprec train --model gpt-mini` on a small text, `mixprec eval` and `mixprec generate` on its
# checkpoint (deterministic for a seed), and the bad input of issue 13: missing, empty or short
# text, a context beyond the position table, heads that do not divide the width, a prompt the
# model cannot take, a GPT checkpoint given to a CNN run.
source "$(dirname "$0")/common.sh"
TEXT="$WORK/text.txt"
for i in $(seq 1 80); do echo "the quick brown fox jumps over the lazy dog. pack my box with five dozen jugs."; done > "$TEXT"
TINY=(--model gpt-mini --data "text:$TEXT" --context 16 --layers 1 --heads 2 --width 16 --batch-size 4
      --limit-test 8 --threads 1 --no-progress --seed 3)

if ! "$MIXPREC" train "${TINY[@]}" --precision bf16 --max-steps 6 --checkpoint-dir "$WORK/gpt" \
     --log "$WORK/run.jsonl" > "$WORK/train.out" 2>&1; then
  echo "FAIL train: $(cat "$WORK/train.out")"; exit 1
fi
grep -q "val loss" "$WORK/train.out" && grep -q '"bits_per_byte"' "$WORK/run.jsonl" &&
  grep -q '"val_loss"' "$WORK/run.jsonl" && echo "ok   train logs val_loss and bits_per_byte" ||
  { echo "FAIL train output: $(cat "$WORK/train.out")"; failures=$((failures + 1)); }

"$MIXPREC" eval --checkpoint "$WORK/gpt" > "$WORK/eval.out" 2>&1 && grep -q "bits/byte" "$WORK/eval.out" &&
  echo "ok   eval: $(tail -n 1 "$WORK/eval.out")" ||
  { echo "FAIL eval: $(cat "$WORK/eval.out")"; failures=$((failures + 1)); }

a="$("$MIXPREC" generate --checkpoint "$WORK/gpt" --prompt "the " --tokens 40 --seed 7 --top-k 5)"
b="$("$MIXPREC" generate --checkpoint "$WORK/gpt" --prompt "the " --tokens 40 --seed 7 --top-k 5)"
c="$("$MIXPREC" generate --checkpoint "$WORK/gpt" --prompt "the " --tokens 40 --seed 8 --top-k 5)"
if [ "$a" = "$b" ] && [ "${#a}" -ge 44 ] && [ "${a:0:4}" = "the " ] && [ "$a" != "$c" ]; then
  echo "ok   generate: deterministic for a seed, other seeds differ"
else
  echo "FAIL generate: '$a' / '$b' / '$c'"; failures=$((failures + 1))
fi

: > "$WORK/empty.txt"
expect_failure missing_text "nope.txt" "$MIXPREC" train "${TINY[@]}" --data "text:$WORK/nope.txt"
expect_failure empty_text "empty" "$MIXPREC" train "${TINY[@]}" --data "text:$WORK/empty.txt"
echo "short" > "$WORK/short.txt"
expect_failure short_text "--context 16" "$MIXPREC" train "${TINY[@]}" --data "text:$WORK/short.txt"
expect_failure heads_width "--heads 3 does not divide --width 16" "$MIXPREC" train "${TINY[@]}" --heads 3
expect_failure text_for_cnn "needs a language model" "$MIXPREC" train --model cnn --data "text:$TEXT"
expect_failure gpt_checkpoint_for_cnn "model: checkpoint" "$MIXPREC" train --model cnn --resume "$WORK/gpt"
expect_failure max_steps_zero "--max-steps" "$MIXPREC" train "${TINY[@]}" --max-steps 0
expect_failure context_beyond_table "context: checkpoint 16, requested 64" "$MIXPREC" train "${TINY[@]}" --resume "$WORK/gpt" --context 64 --max-steps 20
expect_failure negative_tokens "--tokens" "$MIXPREC" generate --checkpoint "$WORK/gpt" --prompt "x" --tokens -1
expect_failure empty_prompt "--prompt is empty" "$MIXPREC" generate --checkpoint "$WORK/gpt" --prompt ""
"$MIXPREC" train --model mlp --limit-train 64 --limit-test 64 --max-steps 1 --threads 1 --no-progress \
  --checkpoint-dir "$WORK/mlp" > /dev/null 2>&1
expect_failure generate_from_classifier "not a language-model" "$MIXPREC" generate --checkpoint "$WORK/mlp"

# `mixprec bench` takes the fp8 recipe flags of `mixprec train` (one StepConfig): a run with all
# three, and values the step refuses (so a flag bench dropped would show: the run would pass).
BENCH=(bench --model gpt-mini --context 16 --layers 1 --heads 2 --width 16 --batch-size 4 --threads 1
       --steps 2 --warmup 1)
"$MIXPREC" "${BENCH[@]}" --precision fp8-delayed --fp8-amax-history 4 --fp8-margin 1 --fp8-format e4m3 \
  --json > "$WORK/bench_fp8.json" 2>&1
check bench_fp8_delayed '"precision": "fp8-delayed"' "$WORK/bench_fp8.json"
expect_failure bench_fp8_history_zero "--fp8-amax-history must be in" "$MIXPREC" "${BENCH[@]}" --precision fp8-delayed --fp8-amax-history 0
expect_failure bench_fp8_margin "--fp8-margin must be in" "$MIXPREC" "${BENCH[@]}" --precision fp8 --fp8-margin 65
expect_failure bench_fp8_format "unknown --fp8-format 'e5m2'" "$MIXPREC" "${BENCH[@]}" --precision fp8 --fp8-format e5m2
finish
