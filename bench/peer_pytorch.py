#!/usr/bin/env python3
"""PyTorch (CPU) peer of `mixprec bench`: the same workloads, batch sizes and optimizer, timed the
same way (per-step wall-clock after a warm-up), so bench/compare.sh can print ours/theirs ratios.

Workloads:
  seed-mlp  Linear 1024-4096, ReLU, 4096-4096, ReLU, 4096-10; batch 256; Adam lr 1e-3;
            cross-entropy on random data.
  cnn       The Fashion-MNIST CNN (conv3x3-BN-ReLU-maxpool x2, 32/64 channels, Linear 3136-128-10);
            batch 128; Adam lr 1e-3; also reports seconds per epoch (469 steps), extrapolated
            from the step time, or measured on the real data set with --real-epoch.
Precisions: fp32, and bf16 = fp32 weights with torch.autocast("cpu", dtype=torch.bfloat16)
around the forward pass and the loss (PyTorch's standard CPU mixed precision; no loss scaling).

Runs in Debian's python3 with python3-torch 1.13 and in any python with torch 2.x; the torch
version is part of every result. Typical use: /usr/bin/python3 bench/peer_pytorch.py --json
"""
import argparse
import gzip
import json
import os
import statistics
import sys
import time

torch = nn = None  # imported in main(), after the thread environment is set


FASHION_DIR = "/usr/share/datasets/fashion-mnist"
CNN_STEPS_PER_EPOCH = 469  # ceil(60000 / 128), as the real epoch runs (last batch partial)
CPU_FLAG_PREFIXES = ("avx512", "amx")
CPU_FLAGS_EXACT = ("avx2", "f16c", "fma")
BLAS = "unknown"  # set in main()


def cpu_flags():
    """The performance-relevant flags of the first CPU in /proc/cpuinfo (empty if unreadable)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = line.split(":", 1)[1].split()
                    return sorted(x for x in flags
                                  if x in CPU_FLAGS_EXACT or x.startswith(CPU_FLAG_PREFIXES))
    except OSError:
        pass
    return []


def import_torch(threads):
    """Imports torch with every thread pool it may use (OpenMP, and OpenBLAS, which Debian's
    generic-BLAS torch calls for fp32 GEMMs and which ignores torch.set_num_threads) capped at
    `threads`; an explicit environment setting wins."""
    global torch, nn
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    try:
        import torch as torch_module
        import torch.nn as nn_module
    except ImportError:
        sys.exit("peer_pytorch.py: torch is not importable from %s; run it with /usr/bin/python3 "
                 "after `apt-get install -y python3-torch`, or with a python that has torch 2.x"
                 % sys.executable)
    torch, nn = torch_module, nn_module
    torch.set_num_threads(threads)


def blas_library():
    """Which BLAS library torch's fp32 GEMMs use: "mkl" when torch was built with MKL, else the
    file name of the libblas/openblas/blis this process mapped after one matmul. Debian's torch
    is built against the generic libblas.so.3, which is netlib's unoptimized reference BLAS
    (~100x slower) unless an optimized alternative (apt-get install libopenblas0-pthread) is
    installed."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    if "BLAS_INFO=mkl" in torch.__config__.show():
        return "mkl"
    found = []
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                name = os.path.basename(path)
                if ("blas" in name or "blis" in name or "mkl_rt" in name) and path not in found:
                    found.append(path)
    except OSError:
        return "unknown"
    if not found:
        return "unknown"
    real = [os.path.realpath(p) for p in found]
    return ",".join(sorted(set(real)))


def reference_blas(blas):
    """True if the BLAS is netlib's reference implementation (Debian's .../blas/libblas.so.3)."""
    return any(p.endswith("/blas/libblas.so.3") for p in blas.split(","))


def seed_mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 10))


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


WORKLOADS = {
    # name: (model factory, batch size, input shape without the batch)
    "seed-mlp": (seed_mlp, 256, (1024,)),
    "cnn": (fashion_cnn, 128, (1, 28, 28)),
}


class Step:
    """One training step (zero_grad, forward+loss under the precision's autocast, backward, Adam)."""

    def __init__(self, model, precision):
        self.model = model
        self.opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()
        self.bf16 = precision == "bf16"

    def __call__(self, x, y):
        self.opt.zero_grad(set_to_none=True)
        if self.bf16:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = self.loss_fn(self.model(x), y)
        else:
            loss = self.loss_fn(self.model(x), y)
        loss.backward()
        self.opt.step()
        return loss


def time_steps(step, x, y, warmup, steps):
    """Per-step wall-clock milliseconds of `steps` steps after `warmup` untimed ones, and the
    process CPU milliseconds of each (all threads): on a shared machine, cpu well below
    threads * wall means the step waited for a core."""
    for _ in range(warmup):
        step(x, y)
    times, cpu = [], []
    for _ in range(steps):
        c0, t0 = time.process_time(), time.perf_counter()
        loss = step(x, y)
        loss.item()  # CPU execution is synchronous; item() just makes the step's end explicit
        times.append((time.perf_counter() - t0) * 1e3)
        cpu.append((time.process_time() - c0) * 1e3)
    return times, cpu


def read_idx(path):
    """An IDX file (gzip) as a uint8 numpy array with its declared shape."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def real_epoch_seconds(step, batch_size):
    """Wall-clock seconds of one shuffled epoch over the Fashion-MNIST training set."""
    images = read_idx(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FASHION_DIR, "train-labels-idx1-ubyte.gz"))
    x_all = torch.from_numpy(images.astype("float32") / 255.0).unsqueeze(1)
    x_all = (x_all - 0.2860) / 0.3530  # the data set's mean / std, as the dataloader normalizes
    y_all = torch.from_numpy(labels.astype("int64"))
    perm = torch.randperm(x_all.shape[0])
    t0 = time.perf_counter()
    for i in range(0, x_all.shape[0], batch_size):
        idx = perm[i:i + batch_size]
        step(x_all[idx], y_all[idx]).item()
    return time.perf_counter() - t0


def run(workload, precision, args):
    torch.manual_seed(0)
    factory, batch, shape = WORKLOADS[workload]
    model = factory()
    model.train()
    step = Step(model, precision)
    x = torch.randn(batch, *shape)
    y = torch.randint(0, 10, (batch,))
    times, cpu = time_steps(step, x, y, args.warmup, args.steps)
    result = {
        "framework": "pytorch",
        "version": torch.__version__,
        "workload": workload,
        "precision": precision,
        "batch_size": batch,
        "threads": torch.get_num_threads(),
        "steps": args.steps,
        "warmup": args.warmup,
        "step_ms": {"median": statistics.median(times), "min": min(times), "max": max(times)},
        "step_cpu_ms": {"median": statistics.median(cpu)},
        "blas": BLAS,
        "cpu_flags": cpu_flags(),
        "load_average": list(os.getloadavg()),
    }
    if workload == "cnn":
        result["epoch_seconds"] = result["step_ms"]["median"] * CNN_STEPS_PER_EPOCH / 1e3
        result["epoch_seconds_source"] = "extrapolated"
        if args.real_epoch:
            result["epoch_seconds"] = real_epoch_seconds(step, batch)
            result["epoch_seconds_source"] = "measured"
    return result


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=["seed-mlp", "cnn", "all"], default="all")
    p.add_argument("--precision", choices=["fp32", "bf16", "all"], default="all")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default 3)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--real-epoch", action="store_true",
                   help="cnn: also time one real epoch on Fashion-MNIST from " + FASHION_DIR)
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        p.error("--steps and --threads must be >= 1 and --warmup >= 0")
    if args.real_epoch and not os.path.isdir(FASHION_DIR):
        p.error("--real-epoch needs the Fashion-MNIST files in " + FASHION_DIR)

    import_torch(args.threads)
    global BLAS
    BLAS = blas_library()
    if reference_blas(BLAS):
        print("peer_pytorch.py: WARNING: torch's fp32 GEMMs use the reference BLAS %s (slow, "
              "not a fair peer); apt-get install -y libopenblas0-pthread" % BLAS, file=sys.stderr)
    workloads = list(WORKLOADS) if args.workload == "all" else [args.workload]
    precisions = ["fp32", "bf16"] if args.precision == "all" else [args.precision]
    results = [run(w, pr, args) for w in workloads for pr in precisions]

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    print("pytorch %s (python %s), threads %d, blas %s\ncpu flags: %s"
          % (torch.__version__, sys.version.split()[0], args.threads, BLAS,
             " ".join(cpu_flags())))
    print("%-9s %-5s %6s %10s %10s %10s %10s %8s" % ("workload", "prec", "batch", "median_ms",
                                                      "min_ms", "max_ms", "cpu_ms", "epoch_s"))
    for r in results:
        ms = r["step_ms"]
        epoch = "%.1f" % r["epoch_seconds"] if "epoch_seconds" in r else "-"
        print("%-9s %-5s %6d %10.2f %10.2f %10.2f %10.2f %8s" % (
            r["workload"], r["precision"], r["batch_size"], ms["median"], ms["min"], ms["max"],
            r["step_cpu_ms"]["median"], epoch))
    print("load average: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
