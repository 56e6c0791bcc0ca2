#!/usr/bin/env bash
# Every kernel family runs a vector path: with MIXPREC_VERBOSE=1, `mixprec train --model cnn` and
# `mixprec bench --model seed-mlp` in fp32, bf16 and fp16 log each kernel call with the Highway
# target that ran (the one `mixprec env` names), and no kernel falls back to the reference.
# matmul and conv lines name oneDNN instead, and max-pooling backward over disjoint windows names
# the cpu scatter (a zero fill plus one store per output: it moves only the bytes the gradient
# needs, 5x faster than a vector pass over every input element). Also run with
# MIXPREC_ISA=scalar: the same calls then name the SCALAR target (the cap reaches every family).
source "$(dirname "$0")/common.sh"

target="$("$MIXPREC" env | sed -n 's/^simd: *\([A-Z0-9_]*\).*/\1/p')"
if [ -z "$target" ]; then echo "FAIL env: no simd line"; exit 1; fi
echo "simd target: $target"


check_log() {  # check_log NAME FILE TARGET
  local name="$1" file="$2" want="$3"
  local lines; lines="$(grep '^mixprec: ' "$file" | grep -v 'warning' | grep -v '^mixprec: matmul\|^mixprec: conv' |
                       grep -v '^mixprec: max_pool2d_backward [a-z0-9]*: ran cpu scatter;')"
  local bad; bad="$(grep -v ": ran $want" <<<"$lines" | sort | uniq -c | sort -rn | head -8)"
  if [ -n "$bad" ]; then
    echo "FAIL $name: kernel calls that did not run $want:"; echo "$bad"; failures=$((failures + 1))
  else
    echo "ok   $name: $(wc -l <<<"$lines") kernel calls ran $want"
  fi
}

require_families() {  # require_families NAME FILE FAMILY...
  local name="$1" file="$2"; shift 2
  for fam in "$@"; do
    if ! grep -q "^mixprec: $fam" "$file"; then
      echo "FAIL $name: no '$fam' kernel call in the log"; failures=$((failures + 1))
    fi
  done
}

for p in fp32 bf16 fp16; do
  if MIXPREC_VERBOSE=1 "$MIXPREC" train --model cnn --precision $p --epochs 1 --limit-train 512 \
       --limit-test 128 --batch-size 64 --no-progress > /dev/null 2> "$WORK/train_$p"; then
    check_log "train cnn $p" "$WORK/train_$p" "$target"
    # Pooling runs as max_pool2d, or inside batch_norm_relu_max_pool2d where the CNN's
    # activations are channels-last (the default on CPUs with avx512_bf16).
    fams=(convert relu fill sum norm2 cross_entropy batch_norm '\(max_pool2d\|batch_norm_relu_max_pool2d\)' adam)
    [ "$p" = fp16 ] && fams+=(unscale)
    require_families "train cnn $p" "$WORK/train_$p" "${fams[@]}"
  else
    echo "FAIL train cnn $p: exit status $?"; tail -3 "$WORK/train_$p"; failures=$((failures + 1))
  fi
  if MIXPREC_VERBOSE=1 "$MIXPREC" bench --model seed-mlp --precision $p --steps 1 --warmup 1 \
       --width 512 --batch-size 64 > /dev/null 2> "$WORK/bench_$p"; then
    check_log "bench seed-mlp $p" "$WORK/bench_$p" "$target"
  else
    echo "FAIL bench seed-mlp $p: exit status $?"; tail -3 "$WORK/bench_$p"; failures=$((failures + 1))
  fi
done

if MIXPREC_ISA=scalar MIXPREC_VERBOSE=1 "$MIXPREC" train --model cnn --precision fp16 --epochs 1 \
     --limit-train 256 --limit-test 64 --batch-size 64 --no-progress > /dev/null 2> "$WORK/scalar"; then
  check_log "train cnn fp16, MIXPREC_ISA=scalar" "$WORK/scalar" SCALAR
else
  echo "FAIL scalar: exit status $?"; tail -3 "$WORK/scalar"; failures=$((failures + 1))
fi
finish
