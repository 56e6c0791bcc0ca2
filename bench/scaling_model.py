#!/usr/bin/env python3
"""Expected data-parallel scaling from the cost model of docs/distributed.md.

One rank per node; every node has the single-node figures measured here (`mixprec bench`):
  compute_ms   forward + backward of the per-node batch (weak scaling: the per-node batch stays)
  optimizer_ms the optimizer pass over all parameters (ZeRO-1 divides it by N)
The gradients (4 bytes per parameter) are reduce-scattered in buckets (pairwise messages, one
per other rank and bucket) and then all-gathered (Open MPI's ring for large messages):
  bytes each rank sends = 2 (N - 1) / N * 4 P          (fp32 wire; 16-bit wires halve it)
  messages per rank     = (N - 1) * buckets + (N - 1)  (reduce-scatter + ring all-gather)
  t_comm = messages * alpha + bytes / beta
plus local_ms, the exchange's own CPU passes (copy in, sum, copy back), measured on one node.
The reduce-scatter can hide behind backward (buckets leave as gradients appear); the estimate
takes the hidden part as min(t_reduce_scatter, overlap * compute), overlap = the share of the
step that is backward after the first bucket is ready (2/3 of compute is backward; default 0.5).
Efficiency = t_step(1) / t_step(N) (weak scaling: each node does the same work per step).

usage: scaling_model.py --params P --compute-ms C --optimizer-ms O [--buckets K]
                        [--nodes 8,64,512] [--gbps 25,100] [--latency-us 5] [--wire-bytes 4]
                        [--shard-optimizer] [--overlap 0.5] [--local-ms L] [--label NAME]
"""
import argparse


def step_ms(n, a):
    if n == 1:
        return a.compute_ms + a.optimizer_ms, 0.0
    beta = a.gbps * 1e9 / 8  # bytes/s
    alpha = a.latency_us * 1e-6
    share = (n - 1) / n * a.params * a.wire_bytes
    # Sharded: parameters are all-gathered in f32 whatever the wire; unsharded: the sums travel
    # in the wire format.
    gather = (n - 1) / n * a.params * (4 if a.shard_optimizer else a.wire_bytes)
    t_rs = ((n - 1) * a.buckets * alpha + share / beta) * 1e3
    t_ag = ((n - 1) * alpha + gather / beta) * 1e3
    hidden = min(t_rs, a.overlap * a.compute_ms)
    optimizer = a.optimizer_ms / n if a.shard_optimizer else a.optimizer_ms
    return a.compute_ms + optimizer + a.local_ms + t_rs - hidden + t_ag, t_rs + t_ag


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--params", type=float, required=True)
    p.add_argument("--compute-ms", type=float, required=True)
    p.add_argument("--optimizer-ms", type=float, required=True)
    p.add_argument("--buckets", type=int, default=0, help="default: ceil(4 P / 25 MiB)")
    p.add_argument("--nodes", default="8,64,512")
    p.add_argument("--gbps", default="25,100")
    p.add_argument("--latency-us", type=float, default=5.0)
    p.add_argument("--wire-bytes", type=int, default=4, choices=[2, 4])
    p.add_argument("--shard-optimizer", action="store_true")
    p.add_argument("--overlap", type=float, default=0.5)
    p.add_argument("--local-ms", type=float, default=0.0,
                   help="the exchange's own CPU passes per step (copying gradients in and out, summing), measured")
    p.add_argument("--label", default="model")
    a = p.parse_args()
    if a.buckets <= 0:
        a.buckets = max(1, -(-int(a.params * 4) // (25 << 20)))
    nodes = [int(x) for x in a.nodes.split(",")]
    print(f"### {a.label}: {a.params / 1e6:.2f} M parameters, {a.buckets} bucket(s), "
          f"compute {a.compute_ms:.1f} ms + optimizer {a.optimizer_ms:.1f} ms per step on one node, "
          f"{'fp32' if a.wire_bytes == 4 else '16-bit'} wire{', ZeRO-1' if a.shard_optimizer else ''}, "
          f"latency {a.latency_us} us\n")
    print("| network | " + " | ".join(f"{n} nodes: step ms (comm ms), efficiency" for n in nodes) + " |")
    print("|---|" + "---|" * len(nodes))
    base, _ = step_ms(1, a)
    for g in (float(x) for x in a.gbps.split(",")):
        a.gbps = g
        cells = []
        for n in nodes:
            t, comm = step_ms(n, a)
            cells.append(f"{t:.1f} ({comm:.1f}), {base / t:.0%}")
        print(f"| {g:g} Gb/s | " + " | ".join(cells) + " |")
    print()


if __name__ == "__main__":
    main()
