#!/usr/bin/env bash
# Runs `mixprec bench` (ours) and bench/peer_pytorch.py (theirs) on this machine, one after the
# other with the same workloads, batch sizes, step counts and thread count, and prints a table of
# median step times with the ratio ours/theirs (below 1 = ours is faster).
#
# Usage: bench/compare.sh [--steps N] [--warmup W] [--threads T] [--build DIR] [--python PY]
#                         [--workload seed-mlp|cnn|all] [--precision fp32|bf16|all] [--keep DIR]
#   --build DIR   build directory holding the mixprec binary (default: <repo>/build)
#   --python PY   python with torch (default: /usr/bin/python3 if it imports torch, else python3)
#   --keep DIR    also leave the raw JSON of every run in DIR
# Both sides are timed back to back, so a busy machine skews both; the load average is printed
# before and after. Exit status: 0 if every run succeeded, 1 otherwise, 2 on bad usage.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(dirname "$here")"
steps=10 warmup=3 threads=2 build="$repo/build" python="" workload=all precision=all keep=""

die() { echo "compare.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --steps) steps="${2:?--steps needs a value}"; shift 2 ;;
    --warmup) warmup="${2:?--warmup needs a value}"; shift 2 ;;
    --threads) threads="${2:?--threads needs a value}"; shift 2 ;;
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    --python) python="${2:?--python needs an interpreter}"; shift 2 ;;
    --workload) workload="${2:?--workload needs a value}"; shift 2 ;;
    --precision) precision="${2:?--precision needs a value}"; shift 2 ;;
    --keep) keep="${2:?--keep needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
[[ "$steps" =~ ^[1-9][0-9]*$ ]] || die "--steps must be a positive integer, got '$steps'"
[[ "$warmup" =~ ^[0-9]+$ ]] || die "--warmup must be a non-negative integer, got '$warmup'"
[[ "$threads" =~ ^[1-9][0-9]*$ ]] || die "--threads must be a positive integer, got '$threads'"
case "$workload" in seed-mlp|cnn|all) ;; *) die "--workload must be seed-mlp, cnn or all" ;; esac
case "$precision" in fp32|bf16|all) ;; *) die "--precision must be fp32, bf16 or all" ;; esac

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
# An unknown subcommand followed by --help prints the top-level help (exit 0): look for bench's.
bench_help="$("$mixprec" bench --help 2>&1 || true)"
if ! grep -qE 'Usage:.* bench' <<<"$bench_help"; then
  echo "compare.sh: '$mixprec' has no 'bench' subcommand (rebuild it from a tree that has" \
       "tools/mixprec/bench_command.cpp):" >&2
  echo "$bench_help" | head -5 >&2
  exit 1
fi
ours_flags=()  # optional flags, passed only if this build's `mixprec bench` knows them
grep -q -- '--threads' <<<"$bench_help" && ours_flags+=(--threads "$threads")
grep -q -- '--warmup' <<<"$bench_help" && ours_flags+=(--warmup "$warmup")

# --- theirs -------------------------------------------------------------------------------------
if [[ -z "$python" ]]; then
  if /usr/bin/python3 -c 'import torch' 2>/dev/null; then python=/usr/bin/python3
  else python=python3; fi
fi
if ! torch_version="$("$python" -c 'import torch; print(torch.__version__)' 2>/dev/null)"; then
  echo "compare.sh: '$python' cannot import torch; install Debian's (apt-get install -y" \
       "python3-torch, then it is /usr/bin/python3) or pass --python PY" >&2
  exit 1
fi

workloads=(seed-mlp cnn); [[ "$workload" != all ]] && workloads=("$workload")
precisions=(fp32 bf16); [[ "$precision" != all ]] && precisions=("$precision")
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

flags="$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' |
         grep -E '^(avx2|avx512.*|amx.*|f16c|fma)$' | sort | tr '\n' ' ' || true)"
echo "cpu: $(grep -m1 '^model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')," \
     "$(nproc) logical cores"
echo "cpu flags: ${flags:-(none found)}"
echo "ours: $mixprec   theirs: pytorch $torch_version ($python)"
echo "steps $steps, warm-up $warmup, threads $threads; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

failed=0
for w in "${workloads[@]}"; do
  for p in "${precisions[@]}"; do
    batch=(--batch-size 256); [[ "$w" == cnn ]] && batch=(--batch-size 128)  # = the peer's
    if ! OMP_NUM_THREADS="$threads" "$mixprec" bench --model "$w" --precision "$p" \
        --steps "$steps" "${batch[@]}" "${ours_flags[@]}" --json \
        >"$out/ours-$w-$p.json" 2>"$out/ours-$w-$p.err"; then
      echo "ours $w $p failed: $(tail -1 "$out/ours-$w-$p.err")" >&2
      failed=1
    fi
    if ! "$python" "$here/peer_pytorch.py" --workload "$w" --precision "$p" --steps "$steps" \
        --warmup "$warmup" --threads "$threads" --json \
        >"$out/theirs-$w-$p.json" 2>"$out/theirs-$w-$p.err"; then
      echo "theirs $w $p failed: $(tail -1 "$out/theirs-$w-$p.err")" >&2
      failed=1
    fi
  done
done
[[ -n "$keep" ]] && mkdir -p "$keep" && cp "$out"/*.json "$keep"/

runs=(); for w in "${workloads[@]}"; do for p in "${precisions[@]}"; do runs+=("$w:$p"); done; done
python3 - "$out" "${runs[@]}" <<'EOF' || failed=1
import json, os, sys

out = sys.argv[1]
STEPS_PER_EPOCH = 469  # cnn: Fashion-MNIST's 60000 images at batch 128


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


def median(r):
    try:
        return float(r["step_ms"]["median"])
    except (TypeError, KeyError, ValueError):
        return None


def fmt(v, spec="%.2f"):
    return spec % v if v is not None else "n/a"


rows = []
for run in sys.argv[2:]:  # "workload:precision", in the order they ran
    workload, precision = run.split(":")
    ours = load(os.path.join(out, "ours-%s-%s.json" % (workload, precision)))
    theirs = load(os.path.join(out, "theirs-%s-%s.json" % (workload, precision)))
    rows.append((workload, precision, ours, theirs))
blas = sorted({r[3].get("blas", "unknown") for r in rows if r[3]})
if blas:
    print("torch fp32 BLAS: %s" % ", ".join(blas))
    if any("/blas/libblas.so.3" in b for b in blas):
        print("WARNING: that is netlib's reference BLAS: torch's fp32 numbers are not a fair peer"
              " (apt-get install -y libopenblas0-pthread)")
    print()

hdr = "%-9s %-5s %5s %11s %11s %12s %8s %9s %9s" % (
    "workload", "prec", "batch", "ours_ms", "torch_ms", "ours/torch", "ours_ep", "torch_ep",
    "threads")
print(hdr)
print("-" * len(hdr))
bad = False
for workload, precision, ours, theirs in rows:
    om, tm = median(ours), median(theirs)
    bad |= om is None or tm is None
    ratio = om / tm if om is not None and tm else None
    batch = (ours or theirs or {}).get("batch_size", "?")
    oe = te = None
    if workload == "cnn":  # epoch seconds: extrapolated from the median step, like the peer's
        oe = om * STEPS_PER_EPOCH / 1e3 if om is not None else None
        te = (theirs or {}).get("epoch_seconds")
    th = "%s/%s" % ((ours or {}).get("threads", "?"), (theirs or {}).get("threads", "?"))
    print("%-9s %-5s %5s %11s %11s %12s %8s %9s %9s" % (
        workload, precision, batch, fmt(om), fmt(tm), fmt(ratio, "%.2fx"),
        fmt(oe, "%.1fs") if workload == "cnn" else "-",
        fmt(te, "%.1fs") if workload == "cnn" else "-", th))
print()
print("ours_ms / torch_ms: median wall-clock ms per training step (min..max below);"
      " ours/torch < 1 means mixprec is faster.")
for workload, precision, ours, theirs in rows:
    parts = []
    for name, r in (("ours", ours), ("torch", theirs)):
        try:
            s = r["step_ms"]
            parts.append("%s %.2f..%.2f" % (name, s["min"], s["max"]))
        except (TypeError, KeyError):
            parts.append("%s n/a" % name)
    extra = ""
    if ours:
        if ours.get("gemm_ms") is not None and ours.get("optimizer_ms") is not None:
            extra += "; ours gemm %.2f ms, optimizer %.2f ms" % (ours["gemm_ms"],
                                                                 ours["optimizer_ms"])
        if ours.get("allocations_per_step") is not None:
            extra += ", %s allocations/step" % ours["allocations_per_step"]
    print("  %-9s %-5s %s%s" % (workload, precision, ", ".join(parts), extra))
sys.exit(1 if bad else 0)
EOF
echo
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
