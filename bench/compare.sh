#!/usr/bin/env bash
# Runs mixprec (ours) and bench/peer_pytorch.py (theirs: PyTorch on the CPU) on this machine, one
# after the other with the same workloads, batch sizes, precisions, step counts and thread count,
# and prints a table: median step times, ours/torch (below 1 = ours is faster), our 16-bit step
# over our fp32 step, ours over the hardware floor when mixprec reports one, and the peak resident
# memory of each whole process for the same run.
#
# Usage: bench/compare.sh [--steps N] [--warmup W] [--threads T] [--build DIR] [--python PY]
#                         [--workload seed-mlp|cnn|all] [--precision fp32|bf16|fp16|all]
#                         [--epoch] [--epoch-budget S] [--keep DIR]
#   --precision P  all = fp32, bf16 and fp16 (default)
#   --epoch        instead of step times: one real Fashion-MNIST CNN epoch at batch 128 per
#                  precision, ours `mixprec train --model cnn --epochs 1` (train_seconds of its
#                  JSONL log) vs theirs `peer_pytorch.py --real-epoch` (cnn only)
#   --epoch-budget S  torch's real epoch stops after S seconds and is extrapolated from the
#                  batches done, with a note (default 600; its 16-bit autocast can be very slow)
#   --build DIR    build directory holding the mixprec binary (default: <repo>/build)
#   --python PY    python with torch (default: <repo>/build-peer/bin/python, made by
#                  bench/setup-peer.sh, if it exists; else /usr/bin/python3 if it imports torch;
#                  else python3)
#   --keep DIR     also leave the raw JSON/JSONL (and maxrss.py's .rss) of every run in DIR
# --steps and --warmup apply to the step-time mode; --epoch warms the peer up with 1+2 steps.
# A torch precision too slow to run in full (16-bit autocast on CPUs without AVX512_BF16/FP16)
# is shortened, not skipped, and a note says so. Both sides are timed back to back, so a busy
# machine skews both; the load average is printed before and after.
# Exit status: 0 if every run succeeded and gave a time (shortened ones included), 1 if a run
# failed or gave none (or mixprec/torch is missing), 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
steps=10 warmup=3 threads=2 build="$repo/build" python="" workload=all precision=all keep=""
epoch=0 epoch_budget=600

die() { echo "compare.sh: $*" >&2; exit 2; }
need() { [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) need "$@"; steps="$2"; shift 2 ;;
    --warmup) need "$@"; warmup="$2"; shift 2 ;;
    --threads) need "$@"; threads="$2"; shift 2 ;;
    --build) need "$@"; build="$2"; shift 2 ;;
    --python) need "$@"; python="$2"; shift 2 ;;
    --workload) need "$@"; workload="$2"; shift 2 ;;
    --precision) need "$@"; precision="$2"; shift 2 ;;
    --keep) need "$@"; keep="$2"; shift 2 ;;
    --epoch) epoch=1; shift ;;
    --epoch-budget) need "$@"; epoch_budget="$2"; shift 2 ;;
    -h|--help) sed -n '2,27p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, got '$steps'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
[[ "$epoch_budget" =~ ^[1-9][0-9]*$ ]] || die "--epoch-budget must be a positive integer, got '$epoch_budget'"
case "$workload" in seed-mlp|cnn|all) ;; *) die "--workload must be seed-mlp, cnn or all" ;; esac
case "$precision" in fp32|bf16|fp16|all) ;; *) die "--precision must be fp32, bf16, fp16 or all" ;; esac
if (( epoch )) && [[ "$workload" == seed-mlp ]]; then
  die "--epoch trains the cnn on Fashion-MNIST; --workload seed-mlp has no epoch"
fi

# --- ours ---------------------------------------------------------------------------------------
mixprec=""
for cand in "$build/mixprec" "$build/tools/mixprec/mixprec"; do
  if [[ -x "$cand" ]]; then mixprec="$cand"; break; fi
done
if [[ -z "$mixprec" ]]; then
  echo "compare.sh: no mixprec binary in '$build' (looked for mixprec and tools/mixprec/mixprec);" \
       "build it first: cmake -S $repo -B $build -G Ninja -DCMAKE_BUILD_TYPE=Release &&" \
       "ninja -C $build mixprec  (or pass --build DIR)" >&2
  exit 1
fi
sub=bench; (( epoch )) && sub=train
# An unknown subcommand followed by --help prints the top-level help (exit 0): look for the sub's.
sub_help="$("$mixprec" "$sub" --help 2>&1 || true)"
if ! grep -qE "Usage:.* $sub" <<<"$sub_help"; then
  echo "compare.sh: '$mixprec' has no '$sub' subcommand (rebuild it):" >&2
  echo "$sub_help" | head -5 >&2
  exit 1
fi
ours_flags=()  # optional flags, passed only if this build's subcommand knows them
grep -q -- '--threads' <<<"$sub_help" && ours_flags+=(--threads "$threads")
if (( epoch )); then
  # A constant learning rate, as the peer's; the cosine schedule would cost nothing but differ.
  grep -q -- '--scheduler' <<<"$sub_help" && ours_flags+=(--scheduler none)
  grep -q -- '--no-progress' <<<"$sub_help" && ours_flags+=(--no-progress)
else
  grep -q -- '--warmup' <<<"$sub_help" && ours_flags+=(--warmup "$warmup")
fi
loss_scaling=(); grep -q -- '--loss-scaling' <<<"$sub_help" && loss_scaling=(--loss-scaling dynamic)

# --- theirs -------------------------------------------------------------------------------------
if [[ -z "$python" ]]; then
  if [[ -x "$repo/build-peer/bin/python" ]]; then python="$repo/build-peer/bin/python"
  elif /usr/bin/python3 -c 'import torch' 2>/dev/null; then python=/usr/bin/python3
  else python=python3; fi
fi
if ! torch_version="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  echo "compare.sh: '$python' cannot import torch; make the peer venv with bench/setup-peer.sh" \
       "(then it is $repo/build-peer/bin/python) or pass --python PY" >&2
  exit 1
fi

workloads=(seed-mlp cnn); [[ "$workload" != all ]] && workloads=("$workload")
(( epoch )) && workloads=(cnn)
precisions=(fp32 bf16 fp16); [[ "$precision" != all ]] && precisions=("$precision")
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
         grep -E '^(avx2|avx512.*|amx.*|f16c|fma)$' | sort | paste -sd' ' || true)"
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')," \
     "$(nproc) logical cores"
echo "cpu flags: ${flags:-(none found)}"
echo "ours: $mixprec   theirs: pytorch $torch_version ($python)"
if (( epoch )); then
  echo "mode: one real Fashion-MNIST cnn epoch per precision, batch 128, threads $threads;" \
       "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
else
  echo "steps $steps, warm-up $warmup, threads $threads;" \
       "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
fi
echo

# Both sides run under maxrss.py, which records the whole process's peak resident memory.
failed=0
for w in "${workloads[@]}"; do
  for p in "${precisions[@]}"; do
    scaling=(); [[ "$p" == fp16 ]] && scaling=("${loss_scaling[@]}")
    if (( epoch )); then
      ours_cmd=("$mixprec" train --model cnn --epochs 1 --batch-size 128 --precision "$p"
                --log "$out/ours-$w-$p.jsonl" "${ours_flags[@]}" "${scaling[@]}")
      # The peer's timed steps only warm it up here; the epoch follows on the same model.
      theirs_cmd=("$python" "$here/peer_pytorch.py" --workload cnn --precision "$p" --steps 2
                  --warmup 1 --threads "$threads" --real-epoch --epoch-budget-s "$epoch_budget"
                  --json)
    else
      batch=(--batch-size 256); [[ "$w" == cnn ]] && batch=(--batch-size 128)  # = the peer's
      ours_cmd=("$mixprec" bench --model "$w" --precision "$p" --steps "$steps" "${batch[@]}"
                "${ours_flags[@]}" "${scaling[@]}" --json)
      theirs_cmd=("$python" "$here/peer_pytorch.py" --workload "$w" --precision "$p"
                  --steps "$steps" --warmup "$warmup" --threads "$threads" --json)
    fi
    if ! OMP_NUM_THREADS="$threads" python3 "$here/maxrss.py" "$out/ours-$w-$p.rss" -- \
        "${ours_cmd[@]}" >"$out/ours-$w-$p.json" 2>"$out/ours-$w-$p.err"; then
      echo "ours $w $p failed: $(tail -1 "$out/ours-$w-$p.err")" >&2
      failed=1
    fi
    if ! python3 "$here/maxrss.py" "$out/theirs-$w-$p.rss" -- \
        "${theirs_cmd[@]}" >"$out/theirs-$w-$p.json" 2>"$out/theirs-$w-$p.err"; then
      echo "theirs $w $p failed: $(tail -1 "$out/theirs-$w-$p.err")" >&2
      failed=1
    fi
  done
done
if [[ -n "$keep" ]]; then
  mkdir -p "$keep" && { cp "$out"/*.json* "$out"/*.rss "$keep"/ 2>/dev/null || true; }
fi

runs=(); for w in "${workloads[@]}"; do for p in "${precisions[@]}"; do runs+=("$w:$p"); done; done
python3 - "$out" "$epoch" "${runs[@]}" <<'EOF' || failed=1
import json, os, sys

out, epoch_mode = sys.argv[1], sys.argv[2] == "1"
STEPS_PER_EPOCH = 469  # cnn: Fashion-MNIST's 60000 images at batch 128
MIB = 2.0 ** 20


def load(path):
    """The run's result object, or None (missing/empty/unparsable). Accepts an object or a list."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError:
        return None
    data = None
    for start in (0, text.find("{"), text.find("[")):  # tolerate a line of text before the JSON
        if start < 0:
            continue
        try:
            data = json.loads(text[start:])
            break
        except ValueError:
            pass
    if isinstance(data, dict) and isinstance(data.get("results"), list):  # a --compare answer
        data = data["results"]
    if isinstance(data, list):
        data = data[0] if data else None
    return data if isinstance(data, dict) else None


def epoch_line(path):
    """The last epoch object of a `mixprec train --log` JSONL file (one with train_seconds)."""
    found = None
    try:
        with open(path) as f:
            for line in f:
                try:
                    obj = json.loads(line)
                except ValueError:
                    continue
                if isinstance(obj, dict) and obj.get("train_seconds") is not None:
                    found = obj
    except OSError:
        pass
    return found


def number(r, *keys):
    """r[k0][k1]... as a float, or None where any level is missing or null."""
    for k in keys:
        if not isinstance(r, dict) or r.get(k) is None:
            return None
        r = r[k]
    try:
        return float(r)
    except (TypeError, ValueError):
        return None


def rss(r, side, workload, precision):
    """Whole-process peak RSS in bytes: the run's own max_rss_bytes, else maxrss.py's."""
    own = number(r, "max_rss_bytes")
    if own:
        return own
    return number(load(os.path.join(out, "%s-%s-%s.rss" % (side, workload, precision))),
                  "max_rss_bytes")


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt(v, spec="%.2f"):
    return spec % v if v is not None else "n/a"


rows = []
for run in sys.argv[3:]:  # "workload:precision", in the order they ran
    workload, precision = run.split(":")
    ours = load(os.path.join(out, "ours-%s-%s.json" % (workload, precision)))
    theirs = load(os.path.join(out, "theirs-%s-%s.json" % (workload, precision)))
    if epoch_mode:
        ours_epoch = epoch_line(os.path.join(out, "ours-%s-%s.jsonl" % (workload, precision)))
        om = number(ours_epoch, "train_seconds")
        tm = number(theirs, "epoch_seconds")
    else:
        om, tm = number(ours, "step_ms", "median"), number(theirs, "step_ms", "median")
    rows.append(dict(workload=workload, precision=precision, ours=ours, theirs=theirs, om=om,
                     tm=tm, orss=rss(ours, "ours", workload, precision),
                     trss=rss(theirs, "theirs", workload, precision)))

theirs_any = [r["theirs"] for r in rows if r["theirs"]]
if theirs_any:
    t = theirs_any[0]
    b = t.get("torch_build") or {}
    print("torch build: blas %s, mkl %s, onednn %s, cpu path %s; gradient norm via %s" % (
        t.get("blas", "unknown"), b.get("mkl"), b.get("onednn"), b.get("cpu_capability"),
        t.get("grad_norm", "?")))
    if any("/blas/libblas.so.3" in (r.get("blas") or "") for r in theirs_any):
        print("WARNING: that is netlib's reference BLAS: torch's fp32 numbers are not a fair peer"
              " (use torch from PyPI: bench/setup-peer.sh)")
ours_any = [r["ours"] for r in rows if r["ours"]]
if ours_any and ours_any[0].get("onednn"):
    print("ours: %s (max isa %s)" % (ours_any[0]["onednn"], ours_any[0].get("max_isa", "?")))
print()

bad = False
if epoch_mode:
    hdr = "%-9s %-5s %10s %10s %11s %10s %10s %10s %9s" % (
        "workload", "prec", "ours_s", "torch_s", "ours/torch", "ours16/32", "ours_MiB",
        "torch_MiB", "mem o/t")
else:
    hdr = "%-9s %-5s %5s %10s %10s %11s %10s %10s %9s %9s %9s %8s" % (
        "workload", "prec", "batch", "ours_ms", "torch_ms", "ours/torch", "ours16/32",
        "torch16/32", "ours/hw", "ours_ep", "torch_ep", "threads")
print(hdr)
print("-" * len(hdr))
fp32 = {(r["workload"]): r for r in rows if r["precision"] == "fp32"}
for r in rows:
    bad |= r["om"] is None or r["tm"] is None
    ref = fp32.get(r["workload"])
    o16 = t16 = None
    if r["precision"] != "fp32" and ref:
        o16, t16 = ratio(r["om"], ref["om"]), ratio(r["tm"], ref["tm"])
    o16s = "-" if r["precision"] == "fp32" else fmt(o16, "%.2fx")
    t16s = "-" if r["precision"] == "fp32" else fmt(t16, "%.2fx")
    if epoch_mode:
        print("%-9s %-5s %10s %10s %11s %10s %10s %10s %9s" % (
            r["workload"], r["precision"], fmt(r["om"], "%.1f"), fmt(r["tm"], "%.1f"),
            fmt(ratio(r["om"], r["tm"]), "%.2fx"), o16s,
            fmt(r["orss"] and r["orss"] / MIB, "%.0f"), fmt(r["trss"] and r["trss"] / MIB, "%.0f"),
            fmt(ratio(r["orss"], r["trss"]), "%.2fx")))
        continue
    ours, theirs = r["ours"] or {}, r["theirs"] or {}
    oe = te = None
    if r["workload"] == "cnn":  # epoch seconds: extrapolated from the median step, like the peer's
        oe = r["om"] * STEPS_PER_EPOCH / 1e3 if r["om"] is not None else None
        te = number(theirs, "epoch_seconds")
    th = "%s/%s" % (ours.get("threads", "?"), theirs.get("threads", "?"))
    print("%-9s %-5s %5s %10s %10s %11s %10s %10s %9s %9s %9s %8s" % (
        r["workload"], r["precision"], ours.get("batch_size", theirs.get("batch_size", "?")),
        fmt(r["om"]), fmt(r["tm"]), fmt(ratio(r["om"], r["tm"]), "%.2fx"), o16s, t16s,
        fmt(number(ours, "hw_floor_ratio"), "%.2fx"),
        fmt(oe, "%.1fs") if r["workload"] == "cnn" else "-",
        fmt(te, "%.1fs") if r["workload"] == "cnn" else "-", th))
print()
if epoch_mode:
    print("ours_s: train_seconds of `mixprec train`'s epoch line; torch_s: the peer's --real-epoch"
          ". ours16/32: our"
          " 16-bit epoch over our fp32 epoch. MiB: whole-process peak resident memory (ours also"
          " loads and evaluates the test set).")
else:
    print("ours_ms / torch_ms: median wall-clock ms per training step; ours/torch < 1 means"
          " mixprec is faster; ours16/32 (torch16/32): that side's 16-bit step over its fp32"
          " step; ours/hw: our step over mixprec's hardware floor for it (n/a: not reported).")
    print()
    print("peak resident memory of the whole process, same run (ours vs torch; in brackets the"
          " peak up to process exit, measured by maxrss.py: ours' includes its floor runs, both"
          " the interpreter's or program's shutdown):")
    for r in rows:
        exit_peak = [number(load(os.path.join(out, "%s-%s-%s.rss" % (side, r["workload"],
                                                                     r["precision"]))),
                            "max_rss_bytes") for side in ("ours", "theirs")]
        print("  %-9s %-5s ours %6s MiB, torch %6s MiB, ours/torch %6s  [%s / %s MiB]" % (
            r["workload"], r["precision"], fmt(r["orss"] and r["orss"] / MIB, "%.0f"),
            fmt(r["trss"] and r["trss"] / MIB, "%.0f"), fmt(ratio(r["orss"], r["trss"]), "%.2fx"),
            fmt(exit_peak[0] and exit_peak[0] / MIB, "%.0f"),
            fmt(exit_peak[1] and exit_peak[1] / MIB, "%.0f")))
    print()
    print("min..max and floors:")
    for r in rows:
        parts = []
        for name, res in (("ours", r["ours"]), ("torch", r["theirs"])):
            lo, hi = number(res, "step_ms", "min"), number(res, "step_ms", "max")
            parts.append("%s %s..%s" % (name, fmt(lo), fmt(hi)))
        ours = r["ours"] or {}
        extra = ""
        if number(ours, "gemm_ms") is not None and number(ours, "optimizer_ms") is not None:
            extra += "; ours gemm %.2f ms, optimizer %.2f ms" % (ours["gemm_ms"],
                                                                 ours["optimizer_ms"])
        if number(ours, "hw_floor_ms") is not None:
            extra += ", hw floor %.2f ms" % ours["hw_floor_ms"]
        # The floor's peaks are the best this machine has shown (remembered); this run's own
        # samples follow in brackets, so a slow run of the VM shows as such.
        for key, label, unit, digits in (("gemm_peak_gflops", "gemm peak", "GFLOP/s", 0),
                                         ("copy_gbps", "copy", "GB/s", 1)):
            if number(ours, key) is not None:
                extra += ", %s %.*f %s" % (label, digits, ours[key], unit)
                if number(ours, key + "_measured") is not None:
                    extra += " (this run %.*f)" % (digits, ours[key + "_measured"])
        if ours.get("allocations_per_step") is not None:
            extra += ", %s allocations/step" % ours["allocations_per_step"]
        print("  %-9s %-5s %s%s" % (r["workload"], r["precision"], ", ".join(parts), extra))
notes = [(r["workload"], r["precision"], r["theirs"]["shortened"])
         for r in rows if r["theirs"] and r["theirs"].get("shortened")]
if notes:
    print()
    for workload, precision, why in notes:
        print("note: torch %s %s was shortened (too slow on this CPU to run in full): %s"
              % (workload, precision, why))
sys.exit(1 if bad else 0)
EOF
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
