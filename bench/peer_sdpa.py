#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the work bench/attention_step.cpp times.

Causal self-attention, q, k, v as [B, H, T, d] views of [B, T, H, d] memory (a projection's
output), forward and forward + backward, medians of CUDA-event timings after warm-up. Prints
which SDPA backend PyTorch picked (from the kernel names its profiler records), and the same
TFLOP/s convention as attention_step (causal products counted once, backward 2.5x forward).

  peer_sdpa.py [--batch 8] [--heads 12] [--context 1024] [--head-size 64] [--dtype bf16]
               [--iters 20] [--warmup 3] [--json]
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F


def backend_of(fn):
    """The SDPA backend whose kernels one call of fn launches, by kernel name."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = " ".join(e.key.lower() for e in prof.key_averages())
    for key, label in (("cudnn", "cudnn"), ("flash", "flash"), ("fmha", "efficient"),
                       ("efficient", "efficient"), ("mem_eff", "efficient")):
        if key in names:
            return label
    return "math"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--head-size", type=int, default=64)
    p.add_argument("--dtype", choices=["bf16", "f16", "f32"], default="bf16")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("peer_sdpa: needs a CUDA GPU")
    dt = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}[a.dtype]
    b, h, t, d = a.batch, a.heads, a.context, a.head_size
    g = torch.Generator(device="cuda").manual_seed(1)
    leaves = [torch.randn(b, t, h, d, device="cuda", dtype=dt, generator=g).requires_grad_()
              for _ in range(3)]
    dout = torch.randn(b, t, h, d, device="cuda", dtype=dt, generator=g).transpose(1, 2)

    def forward():
        q, k, v = (x.transpose(1, 2) for x in leaves)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    def both():
        forward().backward(dout)

    def median_ms(fn):
        times = []
        for _ in range(a.warmup):
            fn()
        for _ in range(a.iters):
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            fn()
            e.record()
            torch.cuda.synchronize()
            times.append(s.elapsed_time(e))
        return statistics.median(times)

    backend = backend_of(both)
    f = median_ms(forward)
    fb = median_ms(both)
    bwd = fb - f
    flops = 4.0 * b * h * t * t * d / 2.0
    r = {"impl": "pytorch", "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
         "backend": backend, "dtype": a.dtype, "batch": b, "heads": h, "context": t,
         "head_size": d, "forward_ms": round(f, 4), "forward_backward_ms": round(fb, 4),
         "backward_ms": round(bwd, 4), "forward_tflops": round(flops / (f * 1e-3) / 1e12, 1),
         "backward_tflops": round(2.5 * flops / (bwd * 1e-3) / 1e12, 1)}
    if a.json:
        print(json.dumps(r))
    else:
        print("PyTorch %s SDPA (%s backend) on %s, %s, B %d H %d T %d d %d, causal: forward %.3f ms "
              "(%.1f TFLOP/s), forward+backward %.3f ms, backward %.3f ms (%.1f TFLOP/s)"
              % (r["torch"], backend, r["gpu"], a.dtype, b, h, t, d, f, r["forward_tflops"], fb,
                 bwd, r["backward_tflops"]))


if __name__ == "__main__":
    main()
