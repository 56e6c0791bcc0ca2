#!/usr/bin/env bash
# MIXPREC_ISA and MIXPREC_BACKEND: good values steer the kernels (and `mixprec env` says so); an
# unknown value, or a level this CPU lacks, warns once, says what runs instead and never crashes.
source "$(dirname "$0")/common.sh"

run_env() {  # run_env NAME VAR=VALUE...: `mixprec env` must exit 0; stdout+stderr in $WORK/NAME
  local name="$1"; shift
  if env "$@" "$MIXPREC" env > "$WORK/$name" 2>&1; then :; else
    echo "FAIL $name: exit status $?"; cat "$WORK/$name"; failures=$((failures + 1))
  fi
}

# Which levels are this class's own and which are foreign, and the target a level runs, come from
# the table of CPU classes (`mixprec env --classes --json`) for the class in force (the real
# CPU's, or MIXPREC_CPU_PROFILE's: scripts/test-cpu-profiles.sh runs this under every profile),
# never from the machine this was written on.
read -r own foreign own_target < <(class_fact "own_level foreign_level own_target")
if [ -z "$own_target" ]; then echo "FAIL: no class facts from mixprec env"; exit 1; fi

run_env unknown_isa MIXPREC_ISA=pentium4
check unknown_isa_warns "MIXPREC_ISA=pentium4 is not a known level" "$WORK/unknown_isa"
check unknown_isa_runs "^simd:" "$WORK/unknown_isa"

run_env foreign_isa MIXPREC_ISA=$foreign
check foreign_isa_warns "MIXPREC_ISA=$foreign names a level this CPU lacks" "$WORK/foreign_isa"

run_env capped MIXPREC_ISA=$own
check capped_level "^max_isa:   $own" "$WORK/capped"
check_target capped_target "$own_target" "$WORK/capped"
if grep -q "warning" "$WORK/capped"; then echo "FAIL capped: a valid cap warned"; failures=$((failures + 1)); fi

run_env scalar MIXPREC_ISA=scalar
check_target scalar_target "$(class_fact scalar_target)" "$WORK/scalar"

run_env unknown_backend MIXPREC_BACKEND=cuda
check unknown_backend_warns "MIXPREC_BACKEND=cuda is not a backend (known: cpu, ref, devsim); running the cpu backend" "$WORK/unknown_backend"
check unknown_backend_runs "^backend:   cpu" "$WORK/unknown_backend"

run_env ref_backend MIXPREC_BACKEND=ref
check ref_backend "^backend:   ref" "$WORK/ref_backend"
run_env devsim_backend MIXPREC_BACKEND=devsim
check devsim_backend "^backend:   devsim" "$WORK/devsim_backend"

# A whole (short) training run on the reference backend, with verbose logging: every kernel
# call must say it ran the reference.
if MIXPREC_BACKEND=ref MIXPREC_VERBOSE=1 "$MIXPREC" train --model mlp --precision fp16 --epochs 1 \
     --limit-train 256 --limit-test 64 --threads 1 --no-progress > "$WORK/ref_train" 2> "$WORK/ref_train_err"; then
  check ref_train_loss "loss" "$WORK/ref_train"
  check ref_train_logs "ran ref; skipped: MIXPREC_BACKEND=ref" "$WORK/ref_train_err"
  if grep "^mixprec: " "$WORK/ref_train_err" | grep -v "warning" | grep -qv "ran ref"; then
    echo "FAIL ref_train: a kernel did not run the reference:"; grep "^mixprec: " "$WORK/ref_train_err" | grep -v "ran ref" | sort | uniq | head
    failures=$((failures + 1))
  else
    echo "ok   ref_train: every kernel ran the reference"
  fi
else
  echo "FAIL ref_train: exit status $?"; cat "$WORK/ref_train_err" | tail -5; failures=$((failures + 1))
fi
finish
