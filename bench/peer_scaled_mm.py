#!/usr/bin/env python3
"""PyTorch's GEMMs on the work bench/gemm_rate.cpp times: bf16 `mm` and fp8 `torch._scaled_mm`.

C [m, n] = A [m, k] B [n, k]^T with bf16 output, A and B E4M3 of unit scale (randn values), in
bf16 and in fp8 with and without fast accumulation: the same three lines as gemm_rate's --json,
impl "pytorch". Medians of CUDA-event timings after warm-up; TFLOP/s counts 2 m n k.

  peer_scaled_mm.py [--m 8192] [--n 8192] [--k 8192] [--iters 20] [--warmup 3]
"""
import argparse
import json
import statistics

import torch


def median_ms(fn, iters, warmup):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def scaled_mm(a, b_t, scale, fast):
    """torch._scaled_mm across versions (2.4 returned (out, amax), 2.5+ returns out)."""
    out = torch._scaled_mm(a, b_t, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16,
                           use_fast_accum=fast)
    return out[0] if isinstance(out, tuple) else out


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for dim in ("m", "n", "k"):
        p.add_argument("--" + dim, type=int, default=8192)
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("peer_scaled_mm: needs a CUDA GPU")
    g = torch.Generator(device="cuda").manual_seed(1)
    a16 = torch.randn(a.m, a.k, device="cuda", dtype=torch.bfloat16, generator=g)
    b16 = torch.randn(a.n, a.k, device="cuda", dtype=torch.bfloat16, generator=g)
    a8, b8 = a16.to(torch.float8_e4m3fn), b16.to(torch.float8_e4m3fn)
    scale = torch.ones((), device="cuda", dtype=torch.float32)
    runs = [("bf16", lambda: torch.mm(a16, b16.t())),
            # _scaled_mm wants B column-major: b8.t() is the [k, n] view of the [n, k] rows
            ("fp8", lambda: scaled_mm(a8, b8.t(), scale, False)),
            ("fp8-fast-accum", lambda: scaled_mm(a8, b8.t(), scale, True))]
    flops = 2.0 * a.m * a.n * a.k
    for name, fn in runs:
        try:
            ms = median_ms(fn, a.iters, a.warmup)
        except RuntimeError as e:  # e.g. a GPU without fp8 Tensor Cores
            print(json.dumps({"impl": "pytorch", "gemm": name, "m": a.m, "n": a.n, "k": a.k,
                              "error": str(e).splitlines()[0]}))
            continue
        print(json.dumps({"impl": "pytorch", "device": "cuda", "gemm": name, "m": a.m, "n": a.n,
                          "k": a.k, "ms": round(ms, 4), "tflops": round(flops / (ms * 1e-3) / 1e12, 1)}))


if __name__ == "__main__":
    main()
