#!/usr/bin/env bash
# --device on the commands that compute: cpu and devsim run; cuda on a machine or build that
# cannot run it fails with one line saying why (no driver, no GPU, a build without CUDA, no
# CUDA kernels yet) and a non-zero exit, before anything is written. `mixprec env` lists the
# GPUs or says why there are none, and the JSON agrees.
source "$(dirname "$0")/common.sh"
SMALL=(--model mlp --limit-train 256 --limit-test 100 --threads 1 --no-progress)

why="$("$MIXPREC" env --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["cuda"]
print("" if c["gpus"] else c["why_none"])')" || { echo "FAIL env_json: no cuda section"; exit 1; }
if [ -n "$why" ]; then
  # No usable GPU here (CI): every computing command refuses cuda with that reason.
  expect_failure train_cuda "$why" "$MIXPREC" train "${SMALL[@]}" --device cuda --checkpoint-dir "$WORK/cuda_ckpt"
  [ -e "$WORK/cuda_ckpt" ] && { echo "FAIL train_cuda: wrote $WORK/cuda_ckpt"; failures=$((failures + 1)); }
  expect_failure bench_cuda "$why" "$MIXPREC" bench --model mlp --steps 1 --device cuda:0
  expect_failure eval_cuda "$why" "$MIXPREC" eval --checkpoint "$WORK/none" --device cuda
  grep -q "^gpus:      none: $why" <<<"$("$MIXPREC" env)" || { echo "FAIL env_text: no 'gpus: none' line"; failures=$((failures + 1)); }
else
  # A machine with a GPU: a GPU index past the last one names how many there are.
  expect_failure bench_cuda_index "no GPU 99" "$MIXPREC" bench --model mlp --steps 1 --device cuda:99
  grep -q "^gpu:       cuda:0 " <<<"$("$MIXPREC" env)" || { echo "FAIL env_text: no 'gpu: cuda:0' line"; failures=$((failures + 1)); }
fi
# The cuDNN line (docs/cuda.md "How cuDNN is found"): always there; MIXPREC_CUDNN=off says so in
# a build with the cuDNN path, and the JSON has the same answer.
grep -q "^cudnn:     " <<<"$("$MIXPREC" env)" || { echo "FAIL env_cudnn: no 'cudnn:' line"; failures=$((failures + 1)); }
off_json="$(MIXPREC_CUDNN=off "$MIXPREC" env --json | python3 -c '
import json, sys
c = json.load(sys.stdin)["cuda"]["cudnn"]
print(c.get("why_none", "") if c["built_with_cudnn"] else "MIXPREC_CUDNN=off")')"
if [ "$off_json" = "MIXPREC_CUDNN=off" ]; then
  echo "ok   env_cudnn: the cuDNN line, and MIXPREC_CUDNN=off"
else
  echo "FAIL env_cudnn: MIXPREC_CUDNN=off gave '$off_json'"; failures=$((failures + 1))
fi
expect_failure bad_device "tpu" "$MIXPREC" bench --model mlp --steps 1 --device tpu
expect_failure negative_index "cuda" "$MIXPREC" bench --model mlp --steps 1 --device cuda:-1

# --attention-precision: the two values run; anything else is refused with the accepted values
# named and a non-zero exit, before the command computes anything.
for ap in default highest; do
  if "$MIXPREC" bench --model mlp --steps 1 --warmup 0 --threads 1 --attention-precision "$ap" >/dev/null 2>&1; then
    echo "ok   attention_precision_$ap: accepted"
  else
    echo "FAIL attention_precision_$ap: refused"; failures=$((failures + 1))
  fi
done
expect_failure bad_attention_precision "default" "$MIXPREC" bench --model mlp --steps 1 --attention-precision fast

# --cuda-capture-probe (docs/cuda.md, "CUDA graphs"): a GPU diagnostic. On cpu and devsim it is
# refused in one line naming --device cuda, with a non-zero exit, before a model is built; where
# cuda cannot run, --device cuda is refused as above; --help documents it.
expect_failure capture_probe_cpu "add --device cuda (this run is on cpu)" \
  "$MIXPREC" bench --model mlp --steps 1 --device cpu --cuda-capture-probe
expect_failure capture_probe_devsim "add --device cuda (this run is on devsim:0)" \
  "$MIXPREC" bench --model mlp --steps 1 --device devsim --cuda-capture-probe
if [ -n "$why" ]; then
  expect_failure capture_probe_cuda "$why" "$MIXPREC" bench --model mlp --device cuda --cuda-capture-probe
fi
expect_failure capture_probe_compare "drop --compare" \
  "$MIXPREC" bench --model mlp --compare fp32,bf16 --device devsim --cuda-capture-probe
# The help into a variable first: grep -q exits at its first match, and under pipefail the
# writer's SIGPIPE would fail the pipeline whenever it had more to write.
bench_help="$("$MIXPREC" bench --help)"
if grep -q -- "--cuda-capture-probe" <<<"$bench_help"; then
  echo "ok   capture_probe_help: bench --help documents --cuda-capture-probe"
else
  echo "FAIL capture_probe_help: bench --help lacks --cuda-capture-probe"; failures=$((failures + 1))
fi

# cpu and devsim run where they say: the verbose log names the backend of every kernel call.
devsim_log="$(MIXPREC_VERBOSE=1 "$MIXPREC" bench --model mlp --steps 1 --warmup 0 --threads 1 --device devsim 2>&1 >/dev/null)"
if grep -q "ran devsim" <<<"$devsim_log" && ! grep -q "ran AVX\|ran SSE4\|ran NEON\|ran SVE\|ran SCALAR" <<<"$devsim_log"; then
  echo "ok   devsim: --device devsim runs the simulated device's kernels"
else
  echo "FAIL devsim: --device devsim did not run on devsim: $(head -n 3 <<<"$devsim_log")"; failures=$((failures + 1))
fi
cpu_log="$(MIXPREC_VERBOSE=1 "$MIXPREC" bench --model mlp --steps 1 --warmup 0 --threads 1 --device cpu 2>&1 >/dev/null)"
if grep -q "ran devsim" <<<"$cpu_log"; then
  echo "FAIL cpu: --device cpu ran devsim kernels"; failures=$((failures + 1))
else
  echo "ok   cpu: --device cpu runs the host kernels"
fi
finish
