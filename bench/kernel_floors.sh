#!/usr/bin/env bash
# Kernel micro-benchmarks of every family, each against the scalar reference and against the
# memory-bandwidth floor its binary measures in the same run (a copy of the same bytes):
# conversions, elementwise, reductions (the 21M-element gradient norm), softmax, batch norm,
# pooling, the Adam step and the unscale pass. Prints the median of each benchmark in ms.
#   bench/kernel_floors.sh [BUILD_DIR] [MIN_TIME]      e.g. bench/kernel_floors.sh build 0.3
# MIXPREC_ISA=avx2 (etc.) in the environment measures a lower SIMD target on the same machine.
# Run it on an idle machine: the figures are wall-clock times of multi-threaded kernels.
set -euo pipefail
build=${1:-build}
min_time=${2:-0.3}
out=$(mktemp -d)
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'); $("$build/mixprec" env | grep -E '^(max_isa|simd):' | tr -s ' ' | tr '\n' ' ')"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # run NAME BINARY FILTER
  "$build/bench/$2" --benchmark_filter="$3" --benchmark_min_time="$min_time" \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json > "$out/$1.json" 2> /dev/null
}
run convert bench_convert '.'
run elementwise bench_elementwise 'BM_Memcpy|BM_Add|BM_Unary'
run reduce bench_reduce 'BM_Gradient'
run softmax bench_softmax '256x4096'
run norm bench_norm 'Kernels|Floor'
run pool bench_conv 'pool'
run optim bench_optim '.'
run unscale bench_unscale '.'
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$out" <<'PY'
import json, sys, os
for f in ["convert", "elementwise", "reduce", "softmax", "norm", "pool", "optim", "unscale"]:
    j = json.load(open(os.path.join(sys.argv[1], f + ".json")))
    print(f"\n## {f}")
    for b in j["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        t = b["real_time"]
        unit = b.get("time_unit", "ns")
        ms = t / {"ns": 1e6, "us": 1e3, "ms": 1.0, "s": 1e-3}[unit]
        extra = "".join(f"  {k}={b[k]:.3g}" for k in ("bytes_per_second",) if k in b)
        print(f"{b['run_name']:<70} {ms:10.3f} ms{extra}")
PY
rm -rf "$out"
