#!/usr/bin/env bash
# The one command for a machine with an NVIDIA GPU (docs/cuda.md, "Checking on a GPU").
#
# The lent GPU machines have the CUDA toolkit and PyTorch but no Debian packages (no oneDNN,
# Highway, CLI11, ...) and no network, so the build happens here and travels:
#
#   scripts/check-cuda.sh pack        on a machine with the toolkit and scripts/install-deps.sh's
#                                     packages: builds build-gpu/ (Release, sm_80 + sm_90 + PTX,
#                                     no MPI), and packs mixprec, the test binary, libmixprec, the
#                                     libraries the GPU machine lacks (oneDNN, Highway, ...) and
#                                     small data sets into .gpu/pack.tar.xz (about 30 MB).
#   scripts/check-cuda.sh run [OUT]   on the GPU machine (the device tool: carry .gpu, run
#                                     `bash scripts/check-cuda.sh run $OUT`): unpacks the pack and
#                                     checks, writing OUT/report.md (default ./check-cuda-out):
#       1. mixprec env: the GPU, its compute capability and Tensor-Core types;
#       2. the device conformance harness: every kernel of the table, every dtype, on cuda
#          against the reference, each run twice (bit-identical);
#       3. training parity: seed-mlp, cnn and gpt-mini for 50 steps on cuda and on cpu in fp32
#          (TF32 off), bf16 and fp16, losses compared (fp32 1e-4 relative, 16-bit 1%); fp16 with
#          --inject-overflow: the same steps skipped;
#          fp32 also against the cpu with AVX2 GEMMs: the trajectory's own summation-order spread;
#          then a gpt-mini run checkpointed half way on one device and resumed on the other;
#       4. speed and memory beside PyTorch eager AMP on the same GPU (bench/peer_pytorch.py,
#          bench/peer_gpt.py --device cuda): the seed MLP bf16 step, a GPT-2-small shape (12
#          layers, 12 heads, width 768, context 1024, batch 8, bf16) in tokens/s, peak device
#          memory, and the bf16 GEMM peak (PyTorch's 8192^3 product) to hold bench's "GEMMs
#          alone" against;
#          4c (section resnet). ResNet-50 (bench --model resnet50) beside peer_pytorch.py's
#          resnet50 (eager with --channels-last --cudnn-benchmark, and torch.compile'd at 224):
#          224 px batch 128 bf16, 512 px batch 32 bf16 and fp32: step ms, images/s, peak memory;
#          and ours at 224 in NCHW (--memory-format contiguous) beside our channels-last default;
#          then one verbose step per layout: which convolution path (cuDNN or im2col) each pass took;
#          4d (section fp8). The fp8 GEMM (gemm_rate: kernels::fp8_gemm, with and without fast
#          accumulation, beside our bf16 matmul) against bench/peer_scaled_mm.py's torch.mm and
#          torch._scaled_mm, at 8192^3 and GPT-2-small's four Linear shapes; one verbose call
#          per shape names the path (cuBLASLt fp8 or our kernel, and why); then the GPT-2-small
#          step in fp8-delayed and fp8 against our bf16 step, the same for a GPT-2-medium shape
#          (24 layers, width 1024, 16 heads), and 50 steps of fp8-delayed gpt-mini on the device
#          and on the cpu with their recipe state (scales, amax histories) compared;
#       4e (section fp8quality). GPT-2-small, 500 steps of fortunes in bf16, fp8 and
#          fp8-delayed: validation losses against bf16's (issue 37: within 1%);
#       3 (section parity) also trains each model in bf16 and fp16 with --cuda-graphs on:
#          its losses must be the eager run's bit for bit; 4 (speed) times the GPT-2-small step
#          with --cuda-graphs on beside the eager one and PyTorch;
#       5. where the time goes: the CUDA-graph capture probe on the gpt-mini and GPT-2-small
#          bf16 steps (bench --cuda-capture-probe: graph nodes, or the call and op that broke
#          the capture), profiles of both steps, each matmul call's path (cuBLASLt, epilogue,
#          finishing kernel), and torch.compile'd PyTorch where it compiles in time.
#     MIXPREC_CHECK_COMPILE=0 leaves out the compiled peer (its compilation takes a minute or two).
#     Each step has its own time limit and a failure is reported, not fatal, so one window of
#     the device gives the whole picture. Sections 1-4 took 3-4 minutes on an H200 (the device
#     tool's start adds about half a minute); run it under `timeout` inside the window and
#     tar OUT's logs afterwards (the tool brings back 8 files at most).
#   scripts/check-cuda.sh dry [OUT]   the run's plumbing here, on the simulated device (devsim)
#                                     with 2 steps per run and tiny shapes, from build/'s binaries
#                                     (or MIXPREC_BIN): checks the script, not a GPU.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mode=${1:-}

usage() {
  sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
}

# ---- pack ------------------------------------------------------------------------------------

pack() {
  local build=$here/build-gpu stage
  local launcher=()
  if command -v ccache > /dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache); fi
  # Hopper only (the lent machines are H100/H200): one device pass compiles in half the time.
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIXPREC_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${MIXPREC_PACK_CUDA_ARCHS:-90-real}" \
    -DMIXPREC_MPI=OFF -DMIXPREC_BUILD_BENCHMARKS=OFF -DMIXPREC_BUILD_EXAMPLES=OFF "${launcher[@]}" || return 1
  cmake --build "$build" -j"$(nproc)" --target mixprec_tests mixprec_cli attention_step gemm_rate || return 1
  stage=$(mktemp -d)
  mkdir -p "$stage/bin" "$stage/lib" "$stage/data"
  cp "$build/mixprec" "$build/tests/mixprec_tests" "$build/attention_step" "$build/gemm_rate" "$stage/bin/"
  cp -L "$build/libmixprec.so.0" "$stage/lib/"
  strip --strip-unneeded "$stage/bin/"* "$stage/lib/"*
  # Every library libmixprec and the binaries need, except the C runtime (glibc, libstdc++,
  # libgcc: the GPU machine's are newer) and CUDA's own (the toolkit is there).
  ldd "$stage/bin/mixprec" "$stage/bin/mixprec_tests" "$stage/bin/attention_step" "$stage/bin/gemm_rate" "$stage/lib/libmixprec.so.0" |
    awk '/=> \//{print $3}' | sort -u | while read -r lib; do
      case $(basename "$lib") in
        libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++*|libgcc_s*) ;;
        libcublas*|libcudart*|libcuda.so*) ;;
        libmixprec*) ;;
        *) cp -L "$lib" "$stage/lib/" ;;
      esac
    done
  python3 "$here/scripts/cuda_pack_data.py" "$stage/data" || return 1
  git -C "$here" rev-parse HEAD > "$stage/COMMIT"
  git -C "$here" status --short > "$stage/DIRTY"
  mkdir -p "$here/.gpu"
  grep -qx '/.gpu/' "$here/.git/info/exclude" 2> /dev/null || echo '/.gpu/' >> "$here/.git/info/exclude"
  tar -C "$stage" -cf - . | xz -T0 -6 > "$here/.gpu/pack.tar.xz" || return 1
  rm -rf "$stage"
  ls -la "$here/.gpu/pack.tar.xz"
  echo "pack: carry .gpu and run: bash scripts/check-cuda.sh run \$OUT"
}

# ---- run / dry -------------------------------------------------------------------------------

out=""
report=""
failures=0

say() { printf '%s\n' "$*" >> "$report"; }
# step LIMIT_S LABEL CMD...: runs CMD with a time limit, its output into OUT/LABEL.log and the
# report (fenced, last 40 lines); a failure or a timeout is counted and reported.
step() {
  local limit=$1 label=$2
  shift 2
  local log="$out/$label.log" t0 rc
  t0=$(date +%s)
  timeout "$limit" "$@" > "$log" 2>&1
  rc=$?
  say ""
  say "### $label ($(($(date +%s) - t0)) s, exit $rc)"
  say '```'
  say "\$ $*"
  tail -n 40 "$log" >> "$report"
  say '```'
  if [ "$rc" -ne 0 ]; then
    failures=$((failures + 1))
    say "**FAIL** ($label: exit $rc$([ "$rc" -eq 124 ] && echo ", timed out after $limit s"))"
  fi
  return "$rc"
}

# Runs the rest of the line (a step) with NAME=VALUE ($1) in its environment alone.
with_env() {
  local -x "$1"
  shift
  "$@"
}

run() {
  local dry=$1
  out=${2:-${OUT:-$PWD/check-cuda-out}}
  mkdir -p "$out"
  out=$(cd "$out" && pwd)
  report=$out/report.md
  : > "$report"
  local t_start bin data device steps mp tests attn gemm py small=()
  # MIXPREC_CHECK_SECTIONS picks what runs (a window too short for all of it); default: all.
  local sections=" ${MIXPREC_CHECK_SECTIONS:-env conformance parity checkpoints speed resnet attention fp8 fp8quality sanitize profile compile} "
  want() { [[ $sections == *" $1 "* ]]; }
  t_start=$(date +%s)
  if [ "$dry" = 1 ]; then
    device=devsim steps=2
    small=(--batch-size 8 --limit-train 64 --limit-test 16)  # the reference kernels are slow
    bin=${MIXPREC_BIN:-$here/build}
    mp=$bin/mixprec tests=$bin/tests/mixprec_tests attn=$bin/attention_step gemm=$bin/gemm_rate
    data=$out/data
    python3 "$here/scripts/cuda_pack_data.py" "$data" --train 600 --test 200 || return 1
  else
    device=cuda steps=50
    local work=/tmp/mixprec-gpu
    rm -rf "$work" && mkdir -p "$work"
    tar -C "$work" -xJf "$here/.gpu/pack.tar.xz" || { echo "run: no .gpu/pack.tar.xz (run pack first)" >&2; return 1; }
    mp=$work/bin/mixprec tests=$work/bin/mixprec_tests attn=$work/bin/attention_step gemm=$work/bin/gemm_rate data=$work/data
    # cuBLASLt: the toolkit's, or the one PyTorch's wheels bring.
    local cublas
    cublas=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(os.path.dirname(nvidia.cublas.__file__), "lib"))' 2> /dev/null || true)
    export LD_LIBRARY_PATH="$work/lib:/usr/local/cuda/lib64:/usr/local/cuda/lib${cublas:+:$cublas}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
  py=${PYTHON:-python3}
  local peers=0
  if [ "$dry" = 0 ] && "$py" -c 'import torch; assert torch.cuda.is_available()' 2> /dev/null; then peers=1; fi
  say "# mixprec on $device: check-cuda report"
  say ""
  say "- date: $(date -u +%FT%TZ); commit: $(cat "${work:-/nonexistent}/COMMIT" 2> /dev/null || git -C "$here" rev-parse HEAD)"
  say "- host: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  command -v nvidia-smi > /dev/null && say "- nvidia-smi: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2> /dev/null)"

  if want env; then
  say ""
  say "## 1. The GPU"
  step 60 env "$mp" env

  fi
  if want conformance; then
  say ""
  say "## 2. Conformance: every kernel of the cuda table against the reference (run twice)"
  MIXPREC_CONFORMANCE_DEVICE=$device step 150 conformance "$tests" \
    --gtest_filter='*DeviceConformance*:DeviceStaging*:Gpu*:BackendFallback*' \
    --gtest_output="json:$out/conformance.json"
  say ""
  say '```'
  "$py" "$here/scripts/cuda_report.py" conformance "$out/conformance.json" >> "$report"
  say '```'
  # Cases again with a faster path switched off, so the path behind it stays checked where the
  # faster one takes the calls above: attention from our flash kernels on (not cuDNN's SDPA),
  # convolutions on the im2col path (not cuDNN's).
  local again
  for again in "flash MIXPREC_ATTENTION=flash *DeviceConformance*attention*" \
               "im2col MIXPREC_CUDA_CONV=im2col *DeviceConformance*conv2d*"; do
    local alabel asetting afilter
    read -r alabel asetting afilter <<< "$again"
    MIXPREC_CONFORMANCE_DEVICE=$device with_env "$asetting" step 150 "conformance-$alabel" "$tests" \
      --gtest_filter="$afilter" --gtest_output="json:$out/conformance-$alabel.json"
    say '```'
    "$py" "$here/scripts/cuda_report.py" conformance "$out/conformance-$alabel.json" >> "$report"
    say '```'
  done

  fi
  if want parity; then
  say ""
  say "## 3. Parity: $steps steps on $device and on cpu"
  say ""
  say "| run | train loss $device / cpu (rel) | test loss $device / cpu (rel) | skipped | rtol | cpu avx2 vs native (train / test) | verdict |"
  say "|---|---|---|---|---|---|---|"
  local model prec extra tol dataflag where
  # The training data of a parity model, into dataflag.
  data_of() {
    case $1 in
      seed-mlp) dataflag=(--data synthetic) ;;
      cnn) dataflag=(--data "idx:$data/fmnist") ;;
      gpt-mini) dataflag=(--data "text:$data/text") ;;
    esac
  }
  for model in ${MIXPREC_CHECK_MODELS:-seed-mlp cnn gpt-mini}; do
    data_of "$model"
    for prec in fp32 bf16 fp16 fp16-overflow; do
      extra=()
      tol=0.01
      case $prec in
        fp32) extra=(--matmul-precision highest) tol=0.0001 ;;
        fp16-overflow) [ "$model" = seed-mlp ] || continue; extra=(--inject-overflow 7) ;;
      esac
      for where in "$device" cpu; do
        timeout 90 "$mp" train --model "$model" "${dataflag[@]}" --precision "${prec%-overflow}" \
          --max-steps "$steps" --seed 1 --device "$where" "${extra[@]}" "${small[@]}" \
          --log "$out/train-$model-$prec-$where.jsonl" > "$out/train-$model-$prec-$where.log" 2>&1 ||
          { failures=$((failures + 1)); echo "train $model $prec on $where failed: $(tail -n 1 "$out/train-$model-$prec-$where.log")" >> "$out/parity-errors.log"; }
      done
      local spread=()
      if [ "$prec" = fp32 ]; then
        # The trajectory's own sensitivity to summation order: cpu with AVX2 GEMMs.
        MIXPREC_ISA=avx2 timeout 90 "$mp" train --model "$model" "${dataflag[@]}" --precision fp32 \
          --max-steps "$steps" --seed 1 --device cpu "${extra[@]}" "${small[@]}" \
          --log "$out/train-$model-$prec-cpu-avx2.jsonl" > "$out/train-$model-$prec-cpu-avx2.log" 2>&1 &&
          spread=(--spread "$out/train-$model-$prec-cpu-avx2.jsonl")
      fi
      "$py" "$here/scripts/cuda_report.py" runs "$out/train-$model-$prec-$device.jsonl" \
        "$out/train-$model-$prec-cpu.jsonl" --rtol "$tol" --label "$model $prec" "${spread[@]}" >> "$report"
    done
  done
  # CUDA graphs (--cuda-graphs on: the forward and backward replayed from a graph after two
  # eager steps per shape) must give the eager runs above bit for bit: rtol 0.
  say ""
  say "CUDA graphs: the same runs with --cuda-graphs on against the eager ones above (identical bits expected):"
  say ""
  say "| run | train loss graphs / eager (rel) | test loss graphs / eager (rel) | skipped | rtol | - | verdict |"
  say "|---|---|---|---|---|---|---|"
  for model in ${MIXPREC_CHECK_MODELS:-seed-mlp cnn gpt-mini}; do
    data_of "$model"
    for prec in bf16 fp16; do
      timeout 90 "$mp" train --model "$model" "${dataflag[@]}" --precision "$prec" \
        --max-steps "$steps" --seed 1 --device "$device" --cuda-graphs on "${small[@]}" \
        --log "$out/train-$model-$prec-graphs.jsonl" > "$out/train-$model-$prec-graphs.log" 2>&1 ||
        { failures=$((failures + 1)); echo "train $model $prec --cuda-graphs on failed: $(tail -n 1 "$out/train-$model-$prec-graphs.log")" >> "$out/parity-errors.log"; }
      grep -h "runs without a graph\|^cuda graphs:" "$out/train-$model-$prec-graphs.log" | sed "s/^/- $model $prec: /" >> "$out/graph-notes.log"
      "$py" "$here/scripts/cuda_report.py" runs "$out/train-$model-$prec-graphs.jsonl" \
        "$out/train-$model-$prec-$device.jsonl" --rtol 0 --label "$model $prec graphs" >> "$report"
    done
  done
  if [ -s "$out/graph-notes.log" ]; then say ""; cat "$out/graph-notes.log" >> "$report"; fi
  if [ -s "$out/parity-errors.log" ]; then say ""; sed 's/^/- /' "$out/parity-errors.log" >> "$report"; fi
  fi
  if want checkpoints; then

  # Checkpoints keep one layout on every device: half a run on one, resumed on the other, ends
  # where the whole run on the first does (bf16: within 1%). A constant learning rate, since a
  # cosine schedule spans --max-steps (on one device such a resume gives the whole run's bits).
  say ""
  say "## 3b. Checkpoints across devices: gpt-mini bf16, $((2 * steps)) steps, resumed half way on the other device"
  say ""
  say "| run | train loss resumed / whole (rel) | test loss resumed / whole (rel) | skipped | rtol | spread | verdict |"
  say "|---|---|---|---|---|---|---|"
  local first second ck
  for first in "$device" cpu; do
    second=$([ "$first" = cpu ] && echo "$device" || echo cpu)
    ck=$out/ckpt-from-$first
    rm -rf "$ck"
    timeout 90 "$mp" train --model gpt-mini --data "text:$data/text" --precision bf16 --seed 1 \
      --scheduler none --max-steps "$((2 * steps))" --device "$first" "${small[@]}" \
      --log "$out/ckpt-whole-$first.jsonl" \
      > "$out/ckpt-whole-$first.log" 2>&1 &&
      timeout 90 "$mp" train --model gpt-mini --data "text:$data/text" --precision bf16 --seed 1 \
        --scheduler none --max-steps "$steps" --device "$first" "${small[@]}" --checkpoint-dir "$ck" \
        --checkpoint-every-steps "$steps" > "$out/ckpt-half-$first.log" 2>&1 &&
      timeout 90 "$mp" train --resume "$ck" --max-steps "$((2 * steps))" --device "$second" \
        --log "$out/ckpt-resumed-on-$second.jsonl" > "$out/ckpt-resumed-on-$second.log" 2>&1 ||
      { failures=$((failures + 1)); echo "checkpoint $first -> $second failed: $(tail -q -n 1 "$out"/ckpt-*"$first"*.log "$out/ckpt-resumed-on-$second.log" 2> /dev/null | tail -n 1)" >> "$out/ckpt-errors.log"; }
    "$py" "$here/scripts/cuda_report.py" runs "$out/ckpt-resumed-on-$second.jsonl" \
      "$out/ckpt-whole-$first.jsonl" --rtol 0.01 --label "$first -> $second" >> "$report"
  done
  if [ -s "$out/ckpt-errors.log" ]; then say ""; sed 's/^/- /' "$out/ckpt-errors.log" >> "$report"; fi

  fi
  # GPT-2-small and the seed MLP: the speed, profile and compile sections share the shapes.
  local gpt=(--layers 12 --heads 12 --width 768 --context 1024) gbatch=8 bsteps=20 mlp=()
  if [ "$dry" = 1 ]; then gpt=(--layers 1 --heads 2 --width 32 --context 32) gbatch=2 bsteps=2 mlp=(--batch-size 4 --warmup 0); fi
  if want speed; then
  say ""
  say "## 4. Speed and memory beside PyTorch on the same device"
  # The comparison first (ours and the peer on the same work, then the table), the diagnostics
  # after it: a window that runs out still leaves the figures the issue asks for.
  step 180 bench-seed-mlp-bf16 "$mp" bench --model seed-mlp --precision bf16 --steps "$bsteps" "${mlp[@]}" \
    --device "$device" --json
  step 300 bench-gpt-bf16 "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" --precision bf16 \
    --steps "$bsteps" --device "$device" --json
  # The same step replayed from a CUDA graph (the 3 warm-up steps: eager, rehearsal, capture).
  step 300 bench-gpt-bf16-graphs "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" --precision bf16 \
    --steps "$bsteps" --warmup 3 --device "$device" --cuda-graphs on --json
  if [ "$peers" = 1 ]; then
    step 180 peer-seed-mlp-bf16 "$py" "$here/bench/peer_pytorch.py" --workload seed-mlp --precision bf16 \
      --steps "$bsteps" --device cuda --json
    step 300 peer-gpt-bf16 "$py" "$here/bench/peer_gpt.py" --time "${gpt[@]}" --batch-size "$gbatch" \
      --precision bf16 --steps "$bsteps" --device cuda --json
    step 120 gemm-peak "$py" -c '
import torch, time
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16); b = torch.randn_like(a)
for _ in range(3): a @ b
torch.cuda.synchronize(); t = time.perf_counter(); n = 10
for _ in range(n): a @ b
torch.cuda.synchronize(); s = (time.perf_counter() - t) / n
print("bf16 GEMM 8192^3: %.1f TFLOP/s (PyTorch %s, %s)" % (2 * 8192**3 / s / 1e12, torch.__version__, torch.cuda.get_device_name()))'
    say ""
    say "| workload | step ms ours / PyTorch | PyTorch / ours | tokens/s ours / PyTorch | peak memory ours / PyTorch |"
    say "|---|---|---|---|---|"
    "$py" "$here/scripts/cuda_report.py" speed "seed-mlp bf16" "$out/bench-seed-mlp-bf16.log" "$out/peer-seed-mlp-bf16.log" >> "$report"
    "$py" "$here/scripts/cuda_report.py" speed "GPT-2-small bf16" "$out/bench-gpt-bf16.log" "$out/peer-gpt-bf16.log" >> "$report"
    "$py" "$here/scripts/cuda_report.py" speed "GPT-2-small bf16, --cuda-graphs on" "$out/bench-gpt-bf16-graphs.log" "$out/peer-gpt-bf16.log" >> "$report"
  else
    say ""
    say "(PyTorch peers not run: $([ "$dry" = 1 ] && echo 'dry run' || echo 'no CUDA PyTorch here'))"
  fi

  fi
  if want attention; then
    say ""
    say "## 4b. Attention alone: causal, GPT-2-small's shape (B 8, H 12, T 1024, d 64), beside PyTorch's SDPA"
    local ashape=(--batch 8 --heads 12 --context 1024 --head-size 64)
    [ "$dry" = 1 ] && ashape=(--batch 1 --heads 2 --context 64 --head-size 64 --iters 1 --warmup 0)
    for dt in bf16 f16; do
      MIXPREC_VERBOSE=1 step 60 "attention-path-$dt" "$attn" --device "$device" "${ashape[@]}" --dtype "$dt" --iters 1 --warmup 0
      step 120 "attention-flash-$dt" "$attn" --device "$device" "${ashape[@]}" --dtype "$dt" --json
    done
    MIXPREC_ATTENTION=gemm step 120 attention-gemm-bf16 "$attn" --device "$device" "${ashape[@]}" --dtype bf16 --json
    if [ "$peers" = 1 ]; then
      step 120 attention-pytorch-bf16 "$py" "$here/bench/peer_sdpa.py" "${ashape[@]}" --dtype bf16 --json
      step 120 attention-pytorch-f16 "$py" "$here/bench/peer_sdpa.py" "${ashape[@]}" --dtype f16 --json
    fi
    say ""
    "$py" "$here/scripts/cuda_report.py" attention "$out"/attention-*.log >> "$report"
  fi
  if want fp8; then
    say ""
    say "## 4d. fp8 GEMMs (issue 37): ours (cuBLASLt's fp8 path) against our bf16 and torch._scaled_mm"
    # 8192^3, then GPT-2-small's Linears at B 8 x T 1024 rows: qkv (768 -> 2304), attention out
    # (768 -> 768), MLP up (768 -> 3072) and down (3072 -> 768). Targets: fp8 >= 1.6x our bf16
    # at 8192^3, and at least torch._scaled_mm's rate.
    local gshapes=("8192 8192 8192" "8192 2304 768" "8192 768 768" "8192 3072 768" "8192 768 3072")
    local giters=(--iters 20 --warmup 3)
    if [ "$dry" = 1 ]; then gshapes=("64 96 128"); giters=(--iters 1 --warmup 0); fi
    for shape in "${gshapes[@]}"; do
      read -r gm gn gk <<< "$shape"
      MIXPREC_VERBOSE=1 step 60 "fp8-path-${gm}x${gn}x${gk}" "$gemm" --device "$device" --m "$gm" --n "$gn" --k "$gk" --iters 1 --warmup 0
      step 120 "fp8-ours-${gm}x${gn}x${gk}" "$gemm" --device "$device" --m "$gm" --n "$gn" --k "$gk" "${giters[@]}" --json
      if [ "$peers" = 1 ]; then
        step 120 "fp8-pytorch-${gm}x${gn}x${gk}" "$py" "$here/bench/peer_scaled_mm.py" --m "$gm" --n "$gn" --k "$gk" "${giters[@]}"
      fi
    done
    say ""
    "$py" "$here/scripts/cuda_report.py" gemm "$out"/fp8-ours-*.log "$out"/fp8-pytorch-*.log >> "$report"
    # The GPT-2-small step in both recipes against our bf16 step (the speed section's, or run
    # here). Targets: >= 1.15x bf16's step.
    if [ ! -s "$out/bench-gpt-bf16.log" ]; then
      step 300 bench-gpt-bf16 "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" --precision bf16 \
        --steps "$bsteps" --device "$device" --json
    fi
    for p8 in fp8-delayed fp8; do
      step 300 "bench-gpt-$p8" "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" --precision "$p8" \
        --steps "$bsteps" --device "$device" --json
    done
    say ""
    "$py" "$here/scripts/cuda_report.py" steps "$out/bench-gpt-bf16.log" "$out/bench-gpt-fp8-delayed.log" "$out/bench-gpt-fp8.log" >> "$report"
    # A GPT-2-medium-shaped model (24 layers, width 1024, 16 heads): larger GEMMs, where fp8's
    # rate counts for more of the step. Target: fp8 >= 1.3x bf16's step.
    local gm=(--layers 24 --heads 16 --width 1024 --context 1024) gmbatch=8 gmsteps=10
    if [ "$dry" = 1 ]; then gm=(--layers 2 --heads 2 --width 32 --context 32) gmbatch=2 gmsteps=2; fi
    for p8 in bf16 fp8-delayed fp8; do
      step 300 "bench-gpt-medium-$p8" "$mp" bench --model gpt-mini "${gm[@]}" --batch-size "$gmbatch" --precision "$p8" \
        --steps "$gmsteps" --device "$device" --json
    done
    say ""
    "$py" "$here/scripts/cuda_report.py" steps "$out/bench-gpt-medium-bf16.log" "$out/bench-gpt-medium-fp8-delayed.log" "$out/bench-gpt-medium-fp8.log" >> "$report"
    # Identity (issue 37): the same 50 steps of fp8-delayed gpt-mini on the device and on the
    # cpu; the recipe state (scales, amax histories) compared layer by layer.
    for where in "$device" cpu; do
      step 180 "fp8-identity-$where" "$mp" train --model gpt-mini --data "text:$data/text" --precision fp8-delayed \
        --max-steps "$steps" --seed 1 --device "$where" "${small[@]}" --no-progress --log "$out/fp8-identity-$where.jsonl"
    done
    say ""
    "$py" "$here/scripts/cuda_report.py" fp8-state "$out/fp8-identity-$device.jsonl" "$out/fp8-identity-cpu.jsonl" >> "$report"
  fi
  if want fp8quality; then
    say ""
    say "## 4e. fp8 quality (issue 37): GPT-2-small, 500 steps of fortunes, bf16 and both recipes"
    # Target: fp8 and fp8-delayed validation loss within 1% of bf16's. About a minute a run on
    # an H100 at 20-40 ms a step; two epochs of the corpus at batch 8 x 1024 bytes.
    local gq=(--layers 12 --heads 12 --width 768 --context 1024) gqbatch=8 gqsteps=500
    if [ "$dry" = 1 ]; then gq=(--layers 1 --heads 2 --width 32 --context 32 --limit-test 16) gqbatch=4 gqsteps=4; fi
    for p8 in bf16 fp8 fp8-delayed; do
      step 240 "fp8-quality-$p8" "$mp" train --model gpt-mini "${gq[@]}" --data "text:$data/text" --precision "$p8" \
        --epochs 3 --max-steps "$gqsteps" --batch-size "$gqbatch" --seed 1 --device "$device" \
        --no-progress --log "$out/fp8-quality-$p8.jsonl"
    done
    say ""
    "$py" "$here/scripts/cuda_report.py" quality "$out/fp8-quality-bf16.jsonl" "$out/fp8-quality-fp8.jsonl" \
      "$out/fp8-quality-fp8-delayed.jsonl" >> "$report"
  fi
  if want resnet; then
  say ""
  say "## 4c. ResNet-50 beside PyTorch (channels-last, cudnn.benchmark; and torch.compile)"
  # Each case is "IMAGE_SIZE BATCH PRECISION": 224 batch 128 bf16 (the usual training shape),
  # 512 batch 32 in bf16 and in fp32 (the seeds' worked example: fp32 against bf16 on one shape).
  # Ours and the peer case by case, so a window that runs out leaves whole pairs; the compiled
  # peer (its compilation alone takes a minute or so) last. Dry: tiny images, one step, no peers.
  # A fourth field "contiguous" runs ours in NCHW (the default on a GPU is channels-last, which
  # cuDNN reads in place and the im2col fallback transposes around), against the same PyTorch
  # run as the case without it.
  local rcases=("224 128 bf16" "512 32 bf16" "512 32 fp32" "224 128 bf16 contiguous") rsteps=20 rwarm=()
  local rcase rsize rbatch rprec rfmt
  [ "$dry" = 1 ] && rsteps=1 rwarm=(--warmup 0)
  local rdone=()  # "LOG NAME|PEER LOG NAME|TABLE LABEL" of each case run
  for rcase in "${rcases[@]}"; do
    read -r rsize rbatch rprec rfmt <<< "$rcase"
    local rpeer=resnet50-$rsize-$rprec rname=resnet50-$rsize-$rprec${rfmt:+-$rfmt}
    local rfmt_flag=()
    [ -n "$rfmt" ] && rfmt_flag=(--memory-format "$rfmt")
    [ "$dry" = 1 ] && rsize=32 rbatch=2  # the reference kernels are slow
    step 240 "bench-$rname" "$mp" bench --model resnet50 --image-size "$rsize" --batch-size "$rbatch" \
      --precision "$rprec" --steps "$rsteps" "${rwarm[@]}" "${rfmt_flag[@]}" --device "$device" --json
    if [ "$peers" = 1 ] && [ -z "$rfmt" ]; then
      step 240 "peer-$rname" "$py" "$here/bench/peer_pytorch.py" --workload resnet50 --image-size "$rsize" \
        --batch-size "$rbatch" --precision "$rprec" --steps "$rsteps" --device cuda --channels-last \
        --cudnn-benchmark --json
    fi
    rdone+=("$rname|$rpeer|ResNet-50 $rsize px batch $rbatch $rprec${rfmt:+ (ours $rfmt)}")
  done
  # Which path each of our convolution passes took (cuDNN or im2col, and why not cuDNN): one
  # step of the 224 px bf16 case per layout under MIXPREC_VERBOSE=1, its conv2d lines counted
  # (the cuDNN plan lines name the engine each shape chose; their times are cut so they count).
  local cfmt csize=224 cbatch=128
  [ "$dry" = 1 ] && csize=32 cbatch=2
  for cfmt in channels-last contiguous; do
    MIXPREC_VERBOSE=1 step 240 "conv-paths-$cfmt" "$mp" bench --model resnet50 --image-size "$csize" \
      --batch-size "$cbatch" --precision bf16 --steps 1 --warmup 0 --memory-format "$cfmt" \
      --device "$device" --json
    say ""
    say "Convolution paths, ResNet-50 $csize px bf16 $cfmt (MIXPREC_VERBOSE=1, one step; count, line):"
    say ""
    say '```'
    grep -E '^mixprec: conv2d' "$out/conv-paths-$cfmt.log" | sed -E 's/ \([0-9.]+ ms\)//' | sort \
      | uniq -c | sort -rn | head -n 40 >> "$report"
    say '```'
  done
  if [ "$peers" = 1 ]; then
    if [ "${MIXPREC_CHECK_COMPILE:-1}" != 0 ]; then
      step 240 peer-resnet50-224-bf16-compiled "$py" "$here/bench/peer_pytorch.py" --workload resnet50 \
        --image-size 224 --batch-size 128 --precision bf16 --steps "$rsteps" --device cuda --channels-last \
        --cudnn-benchmark --compile --json
    fi
    say ""
    say "PyTorch: eager AMP, channels-last, cudnn.benchmark (and torch.compile where the label says so)."
    say ""
    say "| workload | step ms ours / PyTorch | PyTorch / ours | images/s ours / PyTorch | peak memory ours / PyTorch |"
    say "|---|---|---|---|---|"
    local r
    local rlog rpeerlog rlabel
    for r in "${rdone[@]}"; do
      IFS='|' read -r rlog rpeerlog rlabel <<< "$r"
      "$py" "$here/scripts/cuda_report.py" speed "$rlabel" "$out/bench-$rlog.log" "$out/peer-$rpeerlog.log" --images >> "$report"
    done
    if [ "${MIXPREC_CHECK_COMPILE:-1}" != 0 ]; then
      "$py" "$here/scripts/cuda_report.py" speed "ResNet-50 224 px batch 128 bf16, PyTorch compiled" \
        "$out/bench-resnet50-224-bf16.log" "$out/peer-resnet50-224-bf16-compiled.log" --images >> "$report"
    fi
  else
    say ""
    say "(PyTorch peers not run: $([ "$dry" = 1 ] && echo 'dry run' || echo 'no CUDA PyTorch here'))"
  fi
  fi
  # The flash kernels under compute-sanitizer on a small causal call with partial blocks:
  # memcheck (out-of-bounds, misaligned) and racecheck (shared-memory hazards of the cp.async
  # double buffering).
  if want sanitize && [ "$dry" = 0 ] && command -v compute-sanitizer > /dev/null; then
    say ""
    say "## 4d. compute-sanitizer on the flash kernels (B 1, H 2, T 200, d 64, forward + backward)"
    local tool
    for tool in memcheck racecheck; do
      step 120 "sanitize-$tool" compute-sanitizer --tool "$tool" --error-exitcode 9 "$attn" --device "$device" \
        --batch 1 --heads 2 --context 200 --head-size 64 --dtype bf16 --iters 1 --warmup 0
    done
  fi
  if want profile; then
  say ""
  say "## 5. Where the time goes"
  local mlp_profile=(--steps 5 --warmup 2)
  [ "$dry" = 1 ] && mlp_profile=(--steps 1 --warmup 0 --batch-size 4)
  # CUDA graphs (issue 35, deliverable 5), first and short: can one step's forward and backward
  # be captured on the backend's stream, and if not, which call in which op breaks it (docs/
  # cuda.md, "The next GPU run"). A probe that reports a failure has done its job: its exit 1 is
  # the finding, not a failure of this check.
  say ""
  say "CUDA-graph capture probe (bench --cuda-capture-probe, after 2 warm-up steps):"
  local probe
  if [ "$dry" = 1 ]; then
    say "(dry run: the probe needs --device cuda; on $device: $("$mp" bench --model gpt-mini --warmup 0 \
      --device "$device" --cuda-capture-probe 2>&1 | tail -n 1))"
  else
    step 90 capture-probe-gpt-mini "$mp" bench --model gpt-mini --precision bf16 --warmup 2 \
      --device "$device" --cuda-capture-probe
    step 120 capture-probe-gpt2-small "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" \
      --precision bf16 --warmup 2 --device "$device" --cuda-capture-probe
    for probe in gpt-mini gpt2-small; do
      if grep -q '^cuda capture probe: .*NOT capturable' "$out/capture-probe-$probe.log" 2> /dev/null; then
        failures=$((failures - 1))
        say "(capture-probe-$probe: exit 1 is the probe's finding, not counted as a failure)"
      fi
    done
    say '```'
    grep -h '^cuda capture probe:' "$out"/capture-probe-*.log >> "$report" 2> /dev/null || say "(no probe line: see the logs)"
    say '```'
  fi
  step 120 profile-gpt-bf16 "$mp" profile --model gpt-mini "${gpt[@]}" --batch-size "$gbatch" --precision bf16 \
    --steps 2 --warmup 1 --top 16 --device "$device"
  step 120 profile-seed-mlp-bf16 "$mp" profile --model seed-mlp --precision bf16 "${mlp_profile[@]}" \
    --top 12 --device "$device"
  # Issue 35's step figures in one place: the GPU's busy share (ops timed by device
  # timestamps, so profiling no longer serialises the step), the host reads, and the floor
  # (each op at the GEMM peak of its dtype or at the copy bandwidth) with what sits above it.
  say ""
  say "GPT-2-small bf16 step, from its profile: busy share, host reads, floor:"
  say '```'
  awk '/^(steps:|[a-z]+(:[0-9]+)? busy:|host transfers|  download:)/ { print }
       /^floor:/ { n = 6 } n > 0 { print; n-- }' "$out/profile-gpt-bf16.log" >> "$report"
  say '```'
  # Which GEMM path each matmul call of one step takes (verbose logs every kernel call: batch 1).
  MIXPREC_VERBOSE=1 step "$([ "$dry" = 1 ] && echo 600 || echo 90)" gemm-paths "$mp" bench --model gpt-mini "${gpt[@]}" --batch-size 1 \
    --precision bf16 --steps 1 --warmup 0 --device "$device"
  grep -h 'matmul' "$out/gemm-paths.log" | sed 's/^.*matmul/matmul/' | sort | uniq -c | sort -rn | head -n 30 \
    > "$out/gemm-paths-summary.log"
  say '```'
  cat "$out/gemm-paths-summary.log" >> "$report"
  say '```'
  fi
  if want compile; then
  if [ "$peers" = 1 ] && [ "${MIXPREC_CHECK_COMPILE:-1}" != 0 ]; then
    step 240 peer-gpt-bf16-compiled "$py" "$here/bench/peer_gpt.py" --time "${gpt[@]}" --batch-size "$gbatch" \
      --precision bf16 --steps "$bsteps" --device cuda --compile --json
    say ""
    say "| workload | step ms ours / PyTorch | PyTorch / ours | tokens/s ours / PyTorch | peak memory ours / PyTorch |"
    say "|---|---|---|---|---|"
    "$py" "$here/scripts/cuda_report.py" speed "GPT-2-small bf16, PyTorch compiled" "$out/bench-gpt-bf16.log" "$out/peer-gpt-bf16-compiled.log" >> "$report"
    "$py" "$here/scripts/cuda_report.py" speed "GPT-2-small bf16 --cuda-graphs on, PyTorch compiled" "$out/bench-gpt-bf16-graphs.log" "$out/peer-gpt-bf16-compiled.log" >> "$report"
  fi

  fi
  say ""
  say "## Summary"
  say ""
  say "$failures step(s) failed; $(( $(date +%s) - t_start )) s in all. Logs beside this report in $out."
  echo "report: $report ($failures failure(s))"
  return 0
}

case $mode in
  pack) pack ;;
  run) run 0 "${2:-}" ;;
  dry) run 1 "${2:-}" ;;
  -h|--help|help) usage ;;
  *) usage >&2; exit 2 ;;
esac
