#!/usr/bin/env python3
"""Formats `mixprec bench --json` results as Markdown table rows for bench/scaling.sh.

  bench_row.py step LABEL JSON          one row of step time, floors, GFLOP/s, allocations
  bench_row.py memory LABEL JSON [REF]  one row of peak memory by category (MiB); with REF (the
                                        fp32 total in bytes) also the ratio to it; the second
                                        output line is this run's total in bytes
"""
import json
import sys


def fmt(value, digits):
    return "n/a" if value is None else f"{value:.{digits}f}"


def step_row(label, r):
    cells = [label, r["precision"], fmt(r["step_ms"]["median"], 1), fmt(r["gemm_ms"], 1),
             fmt(r["optimizer_ms"], 1), fmt(r.get("floor_ratio"), 2), fmt(r["gflops"], 1),
             fmt(r["allocations_per_step"], 0)]
    print("| " + " | ".join(cells) + " |")


def memory_row(label, r, ref):
    peak = r["peak_bytes"]
    mib = lambda key: fmt(peak[key] / 2**20, 1)
    ratio = fmt(peak["total"] / ref, 2) if ref else "1.00"
    cells = [label, r["precision"], mib("parameter"), mib("gradient"), mib("optimizer_state"),
             mib("activation"), mib("total"), ratio]
    print("| " + " | ".join(cells) + " |")
    print(peak["total"])


def main(argv):
    if len(argv) < 4 or argv[1] not in ("step", "memory"):
        sys.exit(__doc__)
    result = json.loads(argv[3])
    if argv[1] == "step":
        step_row(argv[2], result)
    else:
        memory_row(argv[2], result, float(argv[4]) if len(argv) > 4 and argv[4] else None)


if __name__ == "__main__":
    main(sys.argv)
