#!/usr/bin/env bash
# Compares mixprec's byte-level GPT (`--model gpt-mini`) with its PyTorch peer, bench/peer_gpt.py,
# on this machine, in one command, and prints a table (or, with --json, one JSON object).
#
#  1. Training (skip with --no-train): `mixprec train` in fp32, bf16 and fp16 and peer_gpt.py
#     --train in fp32 (--peer-precisions fp32,bf16 adds torch bf16), all from the same initial
#     weights (our fp32 run writes them with --save-initial-weights; the others' are checked to be
#     the same bytes) on the same batches for --steps optimizer steps; then the validation loss,
#     bits per byte, last-epoch train loss and training tokens/s (evaluation excluded) of each, the
#     16-bit/fp32 and mixprec/torch relative differences of the validation loss and the
#     mixprec/torch tokens/s ratio per precision. A first-step check precedes it: the loss and
#     gradient norm of the first batch, ours (`train --max-steps 1`) against the peer's
#     (--check-forward), which agree to ~1e-7 in fp32 when both implement the same model.
#  2. Step time (skip with --no-time): `mixprec bench --model gpt-mini --precision P --json`
#     (tokens_per_second, step_ms.median) against peer_gpt.py --time, for --time-precisions
#     (default fp32,bf16), batch --batch-size windows, the same sizes.
#     Then the same for a bigger GPT where GEMMs dominate more (skip with --no-big): width 512,
#     8 layers, 8 heads, context 512, --big-batch windows (default 4).
#  3. Activation checkpointing (skip with --no-checkpoint): `mixprec bench --model gpt-mini
#     --context 512 --checkpoint-activations` against the same without, fp32: peak activation
#     memory (the JSON's peak_bytes) and step time ratio. Skipped with a message if this build's
#     `mixprec bench --help` has no --checkpoint-activations.
#
# Usage: bench/compare_gpt.sh [--steps N] [--batch-size B] [--context T] [--layers L] [--heads H]
#                             [--width D] [--lr LR] [--optimizer adam|adamw] [--weight-decay WD]
#                             [--no-decay LIST] [--clip C] [--scheduler none|cosine] [--seed S]
#                             [--data text:PATH] [--limit-test N] [--threads T]
#                             [--precisions LIST] [--peer-precisions LIST] [--time-precisions LIST]
#                             [--time-steps N] [--time-warmup W] [--budget-s S] [--ckpt-context T]
#                             [--no-train] [--no-time] [--no-checkpoint] [--compile]
#                             [--isa avx2|avx512|avx512_bf16] [--json] [--keep DIR]
#   --steps N          optimizer steps of every training run (default 300)
#   --batch-size B     windows per batch, training and timing (default 16, mixprec bench's)
#   --context/--layers/--heads/--width   model sizes (default gpt-mini's 128/4/4/128)
#   --lr, --optimizer, --weight-decay, --no-decay, --clip, --scheduler, --seed   the step (default
#                      the GPT recipe: adamw, lr 1e-3, weight decay 0.1, no decay for
#                      bias,norm,embedding, clip 1, cosine over the --steps; seed 0)
#   --data text:PATH   the corpus (default: mixprec's, Debian's /usr/share/games/fortunes)
#   --limit-test N     validation windows (default: all of the validation text)
#   --threads T        threads of both sides (default 2)
#   --precisions LIST  mixprec training precisions (default fp32,bf16,fp16; fp32 is always run)
#   --peer-precisions LIST  torch training precisions (default fp32; torch's 16-bit autocast can
#                      be ~100x slower than fp32 on CPUs without AVX512_BF16/FP16)
#   --time-precisions LIST  step-time precisions (default fp32,bf16)
#   --time-steps N, --time-warmup W   timed and warm-up steps (default 10 and 3)
#   --budget-s S       the peer's --time run is shortened to ~S seconds if its steps are slow
#                      (default 120; noted in the output)
#   --ckpt-context T   context of the activation-checkpointing comparison (default 512)
#   --compile          step time also against torch.compile'd PyTorch (inductor, default mode;
#                      peer_gpt.py --time --compile): one more peer run per precision and model,
#                      its compile time reported apart (needs a C++ compiler for inductor)
#   --isa LEVEL        both sides capped to one x86 CPU class on this machine, to measure that
#                      class's ratio where no such CPU is at hand: MIXPREC_ISA=LEVEL for mixprec;
#                      for torch ATEN_CPU_CAPABILITY (its own kernels), ONEDNN_MAX_CPU_ISA (its
#                      oneDNN GEMMs and convolutions) and MKL_ENABLE_INSTRUCTIONS (its MKL f32
#                      GEMMs) at the same level. torch still sees the real CPU's flags where it
#                      picks a bf16 path, so the emulation is close, not exact (see the note the
#                      tables print)
#   --json             print one JSON object instead of the tables (progress goes to stderr)
#   --keep DIR         also leave every raw JSON/JSONL and the initial weights in DIR
# Environment: MIXPREC = the mixprec binary (default <repo>/build/mixprec); PY = the python with
# torch (default <repo>/build-peer/bin/python, else /work/main/build-peer/bin/python, else python3;
# bench/setup-peer.sh makes that venv). Nothing is built.
# Exit status: 0 if every run succeeded, 1 if one failed (the rest still run and print), 2 on bad
# usage or a missing mixprec/torch.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
steps=300 batch=16 context=0 layers=0 heads=0 width=0
lr=0.001 optimizer=adamw weight_decay=0.1 no_decay=bias,norm,embedding clip=1 scheduler=cosine
seed=0 data="" limit_test=-1 threads=2
precisions=fp32,bf16,fp16 peer_precisions=fp32 time_precisions=fp32,bf16
time_steps=10 time_warmup=3 budget_s=120 ckpt_context=512
do_train=1 do_time=1 do_ckpt=1 do_big=1 big_batch=4 json=0 keep="" do_compile=0 isa=""

die() { echo "compare_gpt.sh: $*" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) need "$@"; steps="$2"; shift 2 ;;
    --batch-size) need "$@"; batch="$2"; shift 2 ;;
    --context) need "$@"; context="$2"; shift 2 ;;
    --layers) need "$@"; layers="$2"; shift 2 ;;
    --heads) need "$@"; heads="$2"; shift 2 ;;
    --width) need "$@"; width="$2"; shift 2 ;;
    --lr) need "$@"; lr="$2"; shift 2 ;;
    --optimizer) need "$@"; optimizer="$2"; shift 2 ;;
    --weight-decay) need "$@"; weight_decay="$2"; shift 2 ;;
    --no-decay) [[ $# -ge 2 ]] || die "--no-decay needs a value ('' for none)"; no_decay="$2"; shift 2 ;;
    --clip) need "$@"; clip="$2"; shift 2 ;;
    --scheduler) need "$@"; scheduler="$2"; shift 2 ;;
    --seed) need "$@"; seed="$2"; shift 2 ;;
    --data) need "$@"; data="$2"; shift 2 ;;
    --limit-test) need "$@"; limit_test="$2"; shift 2 ;;
    --threads) need "$@"; threads="$2"; shift 2 ;;
    --precisions) need "$@"; precisions="$2"; shift 2 ;;
    --peer-precisions) need "$@"; peer_precisions="$2"; shift 2 ;;
    --time-precisions) need "$@"; time_precisions="$2"; shift 2 ;;
    --time-steps) need "$@"; time_steps="$2"; shift 2 ;;
    --time-warmup) need "$@"; time_warmup="$2"; shift 2 ;;
    --budget-s) need "$@"; budget_s="$2"; shift 2 ;;
    --ckpt-context) need "$@"; ckpt_context="$2"; shift 2 ;;
    --no-train) do_train=0; shift ;;
    --no-time) do_time=0; shift ;;
    --no-checkpoint) do_ckpt=0; shift ;;
    --no-big) do_big=0; shift ;;
    --big-batch) need "$@"; big_batch="$2"; shift 2 ;;
    --compile) do_compile=1; shift ;;
    --isa) need "$@"; isa="$2"; shift 2 ;;
    --json) json=1; shift ;;
    --keep) need "$@"; keep="$2"; shift 2 ;;
    -h|--help) sed -n '2,52p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
pos='^[1-9][0-9]*$' nonneg='^[0-9]+$' num='^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$'
for v in steps batch threads time_steps budget_s ckpt_context; do
  [[ "${!v}" =~ $pos ]] || die "--${v//_/-} must be a positive integer, got '${!v}'"
done
for v in context layers heads width time_warmup; do
  [[ "${!v}" =~ $nonneg ]] || die "--${v//_/-} must be a non-negative integer, got '${!v}'"
done
[[ "$limit_test" == -1 || "$limit_test" =~ $pos ]] || die "--limit-test must be >= 1 (or -1 = all)"
[[ "$seed" =~ $nonneg ]] || die "--seed must be a non-negative integer, got '$seed'"
for v in lr weight_decay clip; do
  [[ "${!v}" =~ $num ]] || die "--${v//_/-} must be a non-negative number, got '${!v}'"
done
case "$optimizer" in adam|adamw) ;; *) die "--optimizer must be adam or adamw" ;; esac
# The environment each side runs under: empty, or the caps of --isa.
ours_env=() torch_env=()
case "$isa" in
  "") ;;
  avx2) ours_env=(MIXPREC_ISA=avx2)
        torch_env=(ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 DNNL_MAX_CPU_ISA=AVX2
                   MKL_ENABLE_INSTRUCTIONS=AVX2) ;;
  avx512) ours_env=(MIXPREC_ISA=avx512)
          torch_env=(ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE
                     DNNL_MAX_CPU_ISA=AVX512_CORE MKL_ENABLE_INSTRUCTIONS=AVX512) ;;
  avx512_bf16) ours_env=(MIXPREC_ISA=avx512_bf16)
               torch_env=(ATEN_CPU_CAPABILITY=avx512 ONEDNN_MAX_CPU_ISA=AVX512_CORE_BF16
                          DNNL_MAX_CPU_ISA=AVX512_CORE_BF16 MKL_ENABLE_INSTRUCTIONS=AVX512) ;;
  *) die "--isa must be avx2, avx512 or avx512_bf16, got '$isa'" ;;
esac
case "$scheduler" in none|cosine) ;; *) die "--scheduler must be none or cosine" ;; esac
check_list() {  # name value allowed...
  local name="$1" list="$2"; shift 2
  local item ok a
  IFS=, read -ra items <<<"$list"
  [[ ${#items[@]} -gt 0 ]] || die "$name is empty"
  for item in "${items[@]}"; do
    ok=0; for a in "$@"; do [[ "$item" == "$a" ]] && ok=1; done
    (( ok )) || die "$name: unknown precision '$item' (choose from $*)"
  done
}
check_list --precisions "$precisions" fp32 bf16 fp16
check_list --peer-precisions "$peer_precisions" fp32 bf16 fp16
check_list --time-precisions "$time_precisions" fp32 bf16 fp16
IFS=, read -ra ours_precs <<<"fp32,${precisions//fp32/}"
mapfile -t ours_precs < <(printf '%s\n' "${ours_precs[@]}" | awk 'NF && !seen[$0]++')
IFS=, read -ra peer_precs <<<"$peer_precisions"
IFS=, read -ra time_precs <<<"$time_precisions"

# --- the two sides ------------------------------------------------------------------------------
MIXPREC="${MIXPREC:-$repo/build/mixprec}"
if [[ ! -x "$MIXPREC" ]]; then
  die "no mixprec binary at '$MIXPREC'; build it (cmake -S $repo -B $repo/build -G Ninja" \
      "-DCMAKE_BUILD_TYPE=Release && ninja -C $repo/build mixprec) or set MIXPREC=path"
fi
# (help texts captured first: grep -q closing the pipe early would fail it under pipefail)
train_help="$("$MIXPREC" train --help 2>&1 || true)"
bench_help="$("$MIXPREC" bench --help 2>&1 || true)"
if ! grep -q -- '--save-initial-weights' <<<"$train_help"; then
  die "'$MIXPREC train' has no --save-initial-weights; this script needs a newer build"
fi
if [[ -z "${PY:-}" ]]; then
  for cand in "$repo/build-peer/bin/python" /work/main/build-peer/bin/python; do
    if [[ -x "$cand" ]]; then PY="$cand"; break; fi
  done
  PY="${PY:-python3}"
fi
if ! torch_version="$("$PY" -c 'import numpy, torch; print(torch.__version__)' 2>/dev/null)"; then
  die "'$PY' cannot import torch and numpy; make the peer venv with bench/setup-peer.sh and set" \
      "PY=<venv>/bin/python"
fi

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
say() { echo "compare_gpt.sh: $*" >&2; }

sizes=()
(( context )) && sizes+=(--context "$context")
(( layers )) && sizes+=(--layers "$layers")
(( heads )) && sizes+=(--heads "$heads")
(( width )) && sizes+=(--width "$width")
step_flags=(--lr "$lr" --optimizer "$optimizer" --weight-decay "$weight_decay" --clip "$clip"
            --scheduler "$scheduler" --seed "$seed")
[[ -n "$no_decay" ]] && step_flags+=(--no-decay "$no_decay")
corpus=()
[[ -n "$data" ]] && corpus+=(--data "$data")
data_flags=("${corpus[@]}")
[[ "$limit_test" != -1 ]] && data_flags+=(--limit-test "$limit_test")
# --epochs: as many as --steps needs (the run stops at --max-steps; the cosine schedule lasts
# min(steps per epoch x epochs, max steps) = --steps on both sides).
run_flags=(--batch-size "$batch" --max-steps "$steps" --epochs 10000 --threads "$threads")

load_before="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
failed=0
run() {  # name cmd...: runs cmd with stdout to $out/name.out, stderr to $out/name.err
  local name="$1"; shift
  say "running $name: $*"
  local t0=$SECONDS
  if ! "$@" >"$out/$name.out" 2>"$out/$name.err"; then
    say "$name FAILED: $(tail -3 "$out/$name.err" | tr '\n' ' ')"
    failed=1
    return 1
  fi
  say "  done in $((SECONDS - t0)) s"
}

if (( do_train )); then
  init="$out/init.safetensors"
  for p in "${ours_precs[@]}"; do
    w="$out/init-$p.safetensors"; [[ "$p" == fp32 ]] && w="$init"
    run "train-mixprec-$p" env "${ours_env[@]}" "$MIXPREC" train --model gpt-mini "${sizes[@]}" --precision "$p" \
        "${run_flags[@]}" "${step_flags[@]}" "${data_flags[@]}" --no-progress \
        --log "$out/train-mixprec-$p.jsonl" --save-initial-weights "$w" || true
    if [[ "$p" != fp32 && -f "$w" && -f "$init" ]] && ! cmp -s "$w" "$init"; then
      say "WARNING: mixprec $p started from other initial weights than fp32 ($w vs $init)"
      echo "mixprec $p initial weights differ from fp32's" >>"$out/warnings"
    fi
  done
  if [[ -f "$init" ]]; then
    # First-step check: the first batch's loss and gradient norm on both sides (fp32).
    run "first-mixprec" env "${ours_env[@]}" "$MIXPREC" train --model gpt-mini "${sizes[@]}" --precision fp32 \
        --batch-size "$batch" --max-steps 1 --threads "$threads" "${step_flags[@]}" \
        "${corpus[@]}" --limit-test "$batch" --no-progress \
        --log "$out/first-mixprec.jsonl" || true
    run "first-torch" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --check-forward --init "$init" "${sizes[@]}" \
        --precision fp32 --batch-size "$batch" --seed "$seed" --threads "$threads" \
        "${corpus[@]}" --json || true
    for p in "${peer_precs[@]}"; do
      run "train-torch-$p" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --train --init "$init" "${sizes[@]}" \
          --precision "$p" "${run_flags[@]}" "${step_flags[@]}" "${data_flags[@]}" --quiet \
          --json || true
    done
  else
    say "no initial weights from mixprec fp32: the peer's training runs are skipped"
    failed=1
  fi
fi

if (( do_time )); then
  for p in "${time_precs[@]}"; do
    run "time-mixprec-$p" env "${ours_env[@]}" "$MIXPREC" bench --model gpt-mini "${sizes[@]}" --precision "$p" \
        --batch-size "$batch" --steps "$time_steps" --warmup "$time_warmup" \
        --threads "$threads" --seed "$seed" --json || true
    run "time-torch-$p" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --time "${sizes[@]}" --precision "$p" \
        --batch-size "$batch" --steps "$time_steps" --warmup "$time_warmup" \
        --threads "$threads" --seed "$seed" --budget-s "$budget_s" --json || true
    if (( do_compile )); then
      run "time-compiled-$p" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --time --compile \
          "${sizes[@]}" --precision "$p" --batch-size "$batch" --steps "$time_steps" \
          --warmup "$time_warmup" --threads "$threads" --seed "$seed" --budget-s "$budget_s" \
          --json || true
    fi
  done
  if (( do_big )); then
    big=(--width 512 --layers 8 --heads 8 --context 512)
    for p in "${time_precs[@]}"; do
      run "big-mixprec-$p" env "${ours_env[@]}" "$MIXPREC" bench --model gpt-mini "${big[@]}" --precision "$p" \
          --batch-size "$big_batch" --steps "$time_steps" --warmup "$time_warmup" \
          --threads "$threads" --seed "$seed" --json || true
      run "big-torch-$p" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --time "${big[@]}" --precision "$p" \
          --batch-size "$big_batch" --steps "$time_steps" --warmup "$time_warmup" \
          --threads "$threads" --seed "$seed" --budget-s "$budget_s" --json || true
      if (( do_compile )); then
        run "big-compiled-$p" env "${torch_env[@]}" "$PY" "$here/peer_gpt.py" --time --compile \
            "${big[@]}" --precision "$p" --batch-size "$big_batch" --steps "$time_steps" \
            --warmup "$time_warmup" --threads "$threads" --seed "$seed" --budget-s "$budget_s" \
            --json || true
      fi
    done
  fi
fi

ckpt_note=""
if (( do_ckpt )); then
  if grep -q -- '--checkpoint-activations' <<<"$bench_help"; then
    ckpt_sizes=()  # the model sizes but the context, which is --ckpt-context here
    (( layers )) && ckpt_sizes+=(--layers "$layers")
    (( heads )) && ckpt_sizes+=(--heads "$heads")
    (( width )) && ckpt_sizes+=(--width "$width")
    for mode in plain ckpt; do
      extra=(); [[ "$mode" == ckpt ]] && extra=(--checkpoint-activations)
      run "ckpt-mixprec-$mode" env "${ours_env[@]}" "$MIXPREC" bench --model gpt-mini "${ckpt_sizes[@]}" \
          --context "$ckpt_context" --precision fp32 --batch-size "$batch" \
          --steps "$time_steps" --warmup "$time_warmup" --threads "$threads" --seed "$seed" \
          "${extra[@]}" --json || true
    done
  else
    ckpt_note="this mixprec build's bench has no --checkpoint-activations: skipped"
    say "$ckpt_note"
  fi
else
  ckpt_note="skipped (--no-checkpoint)"
fi

if [[ -n "$keep" ]]; then
  mkdir -p "$keep" && cp -r "$out"/. "$keep"/ && say "raw results kept in $keep"
fi

flags_line="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)"
cpu_model="$(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//' || true)"
load_after="$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || true)"
python3 - "$out" "$json" "$flags_line" "$cpu_model" "$(nproc)" "$MIXPREC" "$PY" "$torch_version" \
    "$ckpt_note" "$ckpt_context" "$steps" "$batch" "${ours_precs[*]}" "${peer_precs[*]}" \
    "${time_precs[*]}" "$do_train" "$do_time" "$do_ckpt" \
    "$optimizer lr $lr, weight decay $weight_decay, no decay '${no_decay}', clip $clip, $scheduler schedule, seed $seed" \
    "$threads" "$load_before" "$load_after" "$do_big" "$big_batch" "$do_compile" "$isa" \
    "${torch_env[*]}" <<'EOF' || failed=1
import json, os, sys

(out, as_json, flags_line, cpu_model, cores, mixprec, py, torch_version, ckpt_note, ckpt_context,
 steps, batch, ours_precs, peer_precs, time_precs, do_train, do_time, do_ckpt,
 step_desc, threads, load_before, load_after, do_big, big_batch, do_compile, isa,
 torch_env) = sys.argv[1:]
ours_precs, peer_precs, time_precs = ours_precs.split(), peer_precs.split(), time_precs.split()
MIB = 2.0 ** 20
PERF = ("avx2", "f16c", "fma")


def load_json(name):
    """The JSON object of $out/name.out (tolerating text before it), or None."""
    try:
        text = open(os.path.join(out, name + ".out")).read()
    except OSError:
        return None
    for start in (0, text.find("{")):
        if start < 0:
            continue
        try:
            d = json.loads(text[start:])
            return d if isinstance(d, dict) else None
        except ValueError:
            pass
    return None


def load_log(name):
    """(header, [epoch lines]) of a mixprec train JSONL log, or (None, [])."""
    header, epochs = None, []
    try:
        for line in open(os.path.join(out, name + ".jsonl")):
            try:
                d = json.loads(line)
            except ValueError:
                continue
            if d.get("type") == "header":
                header = d
            elif d.get("type") == "epoch":
                epochs.append(d)
    except OSError:
        pass
    return header, epochs


def get(d, *keys):
    for k in keys:
        if not isinstance(d, dict) or d.get(k) is None:
            return None
        d = d[k]
    return d


def rel(a, b):
    return (a - b) / abs(b) if a is not None and b not in (None, 0) else None


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(v, spec="%.4f"):
    return spec % v if v is not None else "n/a"


def pct(v):
    return "%+.3f%%" % (100 * v) if v is not None else "n/a"


flags = flags_line.split(":", 1)[1].split() if ":" in flags_line else []
perf_flags = sorted(f for f in flags if f in PERF or f.startswith(("avx512", "amx")))
report = {"cpu": cpu_model, "logical_cores": int(cores), "cpu_flags": perf_flags,
          "cpu_flags_line": flags_line, "mixprec": mixprec, "python": py, "torch": torch_version,
          "steps": int(steps), "batch_size": int(batch), "step": step_desc,
          "threads": int(threads), "load_average_before": load_before,
          "load_average_after": load_after, "isa": isa or None,
          "torch_env": torch_env.split()}
warnings = []
try:
    warnings += [l.strip() for l in open(os.path.join(out, "warnings")) if l.strip()]
except OSError:
    pass

# --- training ---
if do_train == "1":
    runs, model, data = [], None, None
    for p in ours_precs:
        header, epochs = load_log("train-mixprec-%s" % p)
        if header and model is None:
            c = header["config"]
            model = {k: c[k] for k in ("context", "layers", "heads", "width")}
            model["parameters"] = get(header, "model", "parameters")
            data = header.get("data")
        if not epochs:
            runs.append({"side": "mixprec", "precision": p, "failed": True})
            continue
        last = epochs[-1]
        samples = sum(e["train_samples"] for e in epochs)
        seconds = sum(e["train_seconds"] for e in epochs)
        ctx = header["config"]["context"]
        runs.append({"side": "mixprec", "precision": p, "val_loss": last["val_loss"],
                     "bits_per_byte": last["bits_per_byte"], "train_loss": last["train_loss"],
                     "steps": last["optimizer_steps"] + sum(e["skipped_steps"] for e in epochs),
                     "optimizer_steps": last["optimizer_steps"],
                     "skipped_steps": sum(e["skipped_steps"] for e in epochs),
                     "train_seconds": seconds, "tokens_per_second": samples * ctx / seconds,
                     "epochs": len(epochs), "loss_scale": last["loss_scale"],
                     "peak_memory_bytes": last.get("peak_memory_bytes")})
    for p in peer_precs:
        r = load_json("train-torch-%s" % p)
        if not r:
            runs.append({"side": "torch", "precision": p, "failed": True})
            continue
        runs.append({"side": "torch", "precision": p, "val_loss": r["val_loss"],
                     "bits_per_byte": r["bits_per_byte"], "train_loss": r["train_loss"],
                     "steps": r["steps"], "optimizer_steps": r["steps"] - r["skipped_steps"],
                     "skipped_steps": r["skipped_steps"], "train_seconds": r["train_seconds"],
                     "tokens_per_second": r["tokens_per_second"], "epochs": r["epochs_run"],
                     "loss_scale": r["epochs"][-1]["loss_scale"],
                     "train_loss_curve": r["train_loss_curve"], "max_rss_bytes": r["max_rss_bytes"],
                     "torch_build": r.get("torch_build"), "blas": r.get("blas")})
    by = {(r["side"], r["precision"]): r for r in runs}

    def val(side, p):
        return get(by.get((side, p)), "val_loss")

    def tps(side, p):
        return get(by.get((side, p)), "tokens_per_second")

    ratios = {}
    for p in ours_precs:
        if p != "fp32":
            ratios["mixprec_%s_vs_fp32_val_loss_rel" % p] = rel(val("mixprec", p), val("mixprec", "fp32"))
    for p in peer_precs:
        if p != "fp32":
            ratios["torch_%s_vs_fp32_val_loss_rel" % p] = rel(val("torch", p), val("torch", "fp32"))
    for p in peer_precs:
        if p in ours_precs:
            ratios["mixprec_vs_torch_%s_val_loss_rel" % p] = rel(val("mixprec", p), val("torch", p))
            ratios["mixprec_over_torch_%s_tokens_per_second" % p] = ratio(tps("mixprec", p),
                                                                          tps("torch", p))
    if "fp32" in peer_precs:
        for p in ours_precs:
            if p != "fp32":
                ratios["mixprec_%s_over_torch_fp32_tokens_per_second" % p] = ratio(
                    tps("mixprec", p), tps("torch", "fp32"))
    _, first_epochs = load_log("first-mixprec")
    fc = load_json("first-torch")
    first = {"mixprec_loss": get(first_epochs[-1] if first_epochs else None, "train_loss"),
             "torch_loss": get(fc, "loss"),
             "mixprec_grad_norm": get(first_epochs[-1] if first_epochs else None, "grad_norm_max"),
             "torch_grad_norm": get(fc, "grad_norm")}
    first["loss_rel"] = rel(first["mixprec_loss"], first["torch_loss"])
    first["grad_norm_rel"] = rel(first["mixprec_grad_norm"], first["torch_grad_norm"])
    if first["loss_rel"] is not None and abs(first["loss_rel"]) > 1e-5:
        warnings.append("the first-step fp32 losses differ by %.2e (relative): the two sides do not "
                        "compute the same model or batch" % first["loss_rel"])
    report["train"] = {"model": model, "data": data, "runs": runs, "ratios": ratios,
                       "first_step_fp32": first}

# --- step time ---
def time_rows(prefix):
    """One row per time precision from $out/<prefix>-{mixprec,torch}-<precision>.out."""
    rows = []
    for p in time_precs:
        o, t = load_json("%s-mixprec-%s" % (prefix, p)), load_json("%s-torch-%s" % (prefix, p))
        rows.append({"precision": p,
                     "mixprec_step_ms": get(o, "step_ms", "median"),
                     "torch_step_ms": get(t, "step_ms", "median"),
                     "mixprec_tokens_per_second": get(o, "tokens_per_second"),
                     "torch_tokens_per_second": get(t, "tokens_per_second"),
                     "mixprec_step_ms_range": [get(o, "step_ms", "min"), get(o, "step_ms", "max")],
                     "torch_step_ms_range": [get(t, "step_ms", "min"), get(t, "step_ms", "max")],
                     "mixprec_peak_bytes": get(o, "peak_bytes"),
                     "mixprec_max_rss_bytes": get(o, "max_rss_bytes"),
                     "torch_max_rss_bytes": get(t, "max_rss_bytes"),
                     "torch_shortened": get(t, "shortened") or False,
                     "batch_size": get(o, "batch_size") or get(t, "batch_size"),
                     "threads": [get(o, "threads"), get(t, "threads")]})
        rows[-1]["mixprec_over_torch_tokens_per_second"] = ratio(
            rows[-1]["mixprec_tokens_per_second"], rows[-1]["torch_tokens_per_second"])
        rows[-1]["mixprec_over_torch_step_ms"] = ratio(rows[-1]["mixprec_step_ms"],
                                                       rows[-1]["torch_step_ms"])
        if do_compile == "1":
            c = load_json("%s-compiled-%s" % (prefix, p))
            compiled = bool(get(c, "compiled"))
            rows[-1]["torch_compiled"] = {
                "compiled": compiled,
                "step_ms": get(c, "step_ms", "median") if compiled else None,
                "tokens_per_second": get(c, "tokens_per_second") if compiled else None,
                "compile_seconds": get(c, "compile_seconds"),
                "error": get(c, "compile_error") if c else "the run failed (see stderr)"}
            rows[-1]["mixprec_over_torch_compiled_tokens_per_second"] = ratio(
                rows[-1]["mixprec_tokens_per_second"], rows[-1]["torch_compiled"]["tokens_per_second"])
    ref = {"mixprec": rows[0] if rows and rows[0]["precision"] == "fp32" else None}
    for r in rows:
        if r["precision"] != "fp32" and ref["mixprec"]:
            r["mixprec_over_fp32_step_ms"] = ratio(r["mixprec_step_ms"], ref["mixprec"]["mixprec_step_ms"])
            r["torch_over_fp32_step_ms"] = ratio(r["torch_step_ms"], ref["mixprec"]["torch_step_ms"])
    return rows


if do_time == "1":
    report["time"] = {"runs": time_rows("time")}
    if do_big == "1":
        report["time_big"] = {"runs": time_rows("big"), "width": 512, "layers": 8, "heads": 8,
                              "context": 512, "batch_size": int(big_batch)}

# --- activation checkpointing ---
if do_ckpt == "1" and not ckpt_note:
    a, b = load_json("ckpt-mixprec-plain"), load_json("ckpt-mixprec-ckpt")
    ck = {"context": int(ckpt_context),
          "plain": {"step_ms": get(a, "step_ms", "median"), "peak_bytes": get(a, "peak_bytes")},
          "checkpointed": {"step_ms": get(b, "step_ms", "median"), "peak_bytes": get(b, "peak_bytes")}}
    ck["activation_ratio"] = ratio(get(b, "peak_bytes", "activation"), get(a, "peak_bytes", "activation"))
    ck["total_ratio"] = ratio(get(b, "peak_bytes", "total"), get(a, "peak_bytes", "total"))
    ck["step_ms_ratio"] = ratio(ck["checkpointed"]["step_ms"], ck["plain"]["step_ms"])
    if ck["activation_ratio"] is not None and ck["activation_ratio"] > 0.98:
        ck["note"] = ("--checkpoint-activations saved no activation memory: this build's GPT does "
                      "not act on it")
        warnings.append(ck["note"])
    report["checkpoint_activations"] = ck
else:
    report["checkpoint_activations"] = {"skipped": ckpt_note}
report["warnings"] = warnings

if as_json == "1":
    json.dump(report, sys.stdout, indent=2)
    print()
    sys.exit(0)

print("cpu: %s, %s logical cores" % (cpu_model or "?", cores))
print("cpu flags: %s" % (" ".join(perf_flags) or "(none of avx2/avx512*/amx*/f16c/fma)"))
print("mixprec: %s   torch: %s (%s)" % (mixprec, torch_version, py))
print("threads %s on both sides; load average before %s, after %s (2-thread runs on a busy "
      "machine measure the contention, not the code)" % (threads, load_before, load_after))
if isa:
    print("--isa %s: mixprec under MIXPREC_ISA=%s; torch under %s (torch still picks its bf16 "
          "paths from the real CPU's flags)" % (isa, isa, torch_env))
if "train" in report:
    t = report["train"]
    m, d = t["model"] or {}, t["data"] or {}
    print()
    print("TRAINING  gpt-mini context %s, %s layers, %s heads, width %s (%s parameters); batch %s "
          "windows; %s steps; %s" % (m.get("context"), m.get("layers"), m.get("heads"),
                                    m.get("width"), m.get("parameters"), batch, steps, step_desc))
    print("          corpus %s bytes in %s files; %s validation windows" % (
        d.get("bytes"), len(d.get("files") or []), d.get("validation_windows")))
    hdr = "%-8s %-5s %10s %10s %10s %11s %8s %9s" % ("side", "prec", "val_loss", "bits/byte",
                                                   "train_loss", "tokens/s", "skipped", "train_s")
    print(hdr)
    print("-" * len(hdr))
    for r in t["runs"]:
        if r.get("failed"):
            print("%-8s %-5s %s" % (r["side"], r["precision"], "FAILED (see stderr)"))
            continue
        print("%-8s %-5s %10s %10s %10s %11s %8s %9s" % (
            r["side"], r["precision"], fmt(r["val_loss"]), fmt(r["bits_per_byte"]),
            fmt(r["train_loss"]), fmt(r["tokens_per_second"], "%.0f"), r["skipped_steps"],
            fmt(r["train_seconds"], "%.1f")))
    f = t["first_step_fp32"]
    print("first step (fp32, batch %s): loss mixprec %s, torch %s (rel %s); grad norm mixprec %s, "
          "torch %s (rel %s)" % (batch, fmt(f["mixprec_loss"], "%.8f"), fmt(f["torch_loss"], "%.8f"),
                                 fmt(f["loss_rel"], "%.1e"), fmt(f["mixprec_grad_norm"], "%.8f"),
                                 fmt(f["torch_grad_norm"], "%.8f"), fmt(f["grad_norm_rel"], "%.1e")))
    print("ratios:")
    for k, v in t["ratios"].items():
        print("  %-48s %s" % (k, pct(v) if k.endswith("_rel") else fmt(v, "%.2fx")))
    print("val_loss: after the last step, over all validation windows, eval mode; train_loss: mean "
          "of the last epoch's steps; tokens/s: training only (evaluation excluded); *_rel: "
          "(a - b) / b.")
def print_time(section, title):
    print()
    print(title)
    if do_compile == "1":
        hdr = "%-5s %12s %13s %12s %s" % ("prec", "compiled_ms", "compile_s", "tok/s o/c", "")
        print("torch.compile (inductor, default mode) of the same model:")
        print(hdr)
        for r in section["runs"]:
            c = r.get("torch_compiled") or {}
            print("%-5s %12s %13s %12s %s" % (
                r["precision"], fmt(c.get("step_ms"), "%.2f"), fmt(c.get("compile_seconds"), "%.1f"),
                fmt(r.get("mixprec_over_torch_compiled_tokens_per_second"), "%.2fx"),
                "" if c.get("compiled") else "not compiled: %s" % (c.get("error") or "?")))
    hdr = "%-5s %10s %10s %12s %12s %11s %10s %10s" % (
        "prec", "ours_ms", "torch_ms", "ours_tok/s", "torch_tok/s", "tok/s o/t", "ours16/32",
        "torch16/32")
    print(hdr)
    print("-" * len(hdr))
    for r in section["runs"]:
        print("%-5s %10s %10s %12s %12s %11s %10s %10s" % (
            r["precision"], fmt(r["mixprec_step_ms"], "%.2f"), fmt(r["torch_step_ms"], "%.2f"),
            fmt(r["mixprec_tokens_per_second"], "%.0f"), fmt(r["torch_tokens_per_second"], "%.0f"),
            fmt(r["mixprec_over_torch_tokens_per_second"], "%.2fx"),
            fmt(r.get("mixprec_over_fp32_step_ms"), "%.2fx") if r["precision"] != "fp32" else "-",
            fmt(r.get("torch_over_fp32_step_ms"), "%.2fx") if r["precision"] != "fp32" else "-"))
        if r["torch_shortened"]:
            print("  note: torch %s shortened: %s" % (r["precision"], r["torch_shortened"]))
    print("tok/s o/t > 1: mixprec is faster; 16/32: that side's step time over its fp32 step.")


if "time" in report:
    print_time(report["time"], "STEP TIME  mixprec bench --model gpt-mini vs peer_gpt.py --time: "
               "random batch of %s windows, adam lr 1e-3, median of the timed steps" % batch)
if "time_big" in report:
    print_time(report["time_big"], "STEP TIME, BIGGER GPT  width 512, 8 layers, 8 heads, context "
               "512, random batch of %s windows, adam lr 1e-3, median of the timed steps" % big_batch)
ck = report["checkpoint_activations"]
print()
if "skipped" in ck:
    print("ACTIVATION CHECKPOINTING: %s" % ck["skipped"])
else:
    pa, pb = ck["plain"]["peak_bytes"] or {}, ck["checkpointed"]["peak_bytes"] or {}
    print("ACTIVATION CHECKPOINTING  mixprec bench --model gpt-mini --context %d, fp32, batch %s:" %
          (ck["context"], batch))
    print("  peak activation %s -> %s MiB (%s), peak total %s -> %s MiB (%s), step %s -> %s ms (%s)"
          % (fmt(pa.get("activation") and pa["activation"] / MIB, "%.1f"),
             fmt(pb.get("activation") and pb["activation"] / MIB, "%.1f"),
             fmt(ck["activation_ratio"], "%.2fx"),
             fmt(pa.get("total") and pa["total"] / MIB, "%.1f"),
             fmt(pb.get("total") and pb["total"] / MIB, "%.1f"), fmt(ck["total_ratio"], "%.2fx"),
             fmt(ck["plain"]["step_ms"], "%.2f"), fmt(ck["checkpointed"]["step_ms"], "%.2f"),
             fmt(ck["step_ms_ratio"], "%.2fx")))
for w in warnings:
    print("WARNING: %s" % w)
EOF
exit "$failed"
