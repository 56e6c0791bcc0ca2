#!/usr/bin/env python3
"""PyTorch peer of `mixprec bench` (on the CPU, or on an NVIDIA GPU with --device cuda): the same
workloads, batch sizes, optimizer and step structure, timed the same way (per-step wall-clock
after a warm-up), so bench/compare.sh can print ours/theirs ratios.

Usage: peer_pytorch.py [--workload seed-mlp|cnn|resnet50|all] [--precision fp32|bf16|fp16|all]
                       [--steps N] [--warmup W] [--threads T] [--real-epoch] [--json]
                       [--device cpu|cuda|cuda:N] [--matmul-precision highest|high|medium]
                       [--batch-size N] [--image-size N] [--channels-last] [--cudnn-benchmark]
                       [--compile]
Typical use: build-peer/bin/python bench/peer_pytorch.py --workload cnn --precision fp16 --json
  GPU ResNet-50: ... --workload resnet50 --precision bf16 --device cuda --channels-last
                 --cudnn-benchmark [--compile] --json
(build-peer/ is the venv bench/setup-peer.sh makes: torch 2.x from PyPI).

Workloads (the models of src/models/zoo.cpp):
  seed-mlp  Linear 1024-4096, ReLU, 4096-4096, ReLU, 4096-10; batch 256; random data.
  cnn       The Fashion-MNIST CNN (conv3x3-BN-ReLU-maxpool x2, 32/64 channels, no conv bias,
            Linear 3136-128, ReLU, 128-10); batch 128; also reports seconds per epoch (469
            steps), extrapolated from the step time, or measured on the real data set with
            --real-epoch.
  resnet50  torchvision's ResNet-50 (v1.5), written out here in plain torch (torchvision is not
            needed): conv1 7x7/2 pad 3 (no bias), BN, ReLU, maxpool 3/2 pad 1; Bottleneck stages
            of 3, 4, 6, 3 blocks, widths 64/128/256/512 x4 expansion (1x1, 3x3 carrying the
            stride, 1x1, no conv bias; downsample = 1x1 conv + BN on each stage's first block);
            global average pool, Linear 2048-1000; the module names of torchvision's, and
            25,557,032 parameters (asserted when built). Batch 128 of [3, S, S] standard-normal
            images (S = --image-size, default 224), labels uniform in [0, 1000). The JSON adds
            "image_size" and "samples_per_second" (images/s: batch / median step).
            Not part of --workload all (a ResNet-50 step at 224 takes seconds on a CPU): ask
            for it by name.
Every step is the one `mixprec bench` times: forward + cross-entropy under the precision's
autocast, (scaled) backward, unscale, the total gradient norm (computed every step, nothing
clipped), Adam (lr 1e-3) step through the scaler, scaler update, gradients dropped.
Precisions (weights and Adam state stay fp32 in all three; DEV is "cpu" or "cuda", per --device):
  fp32  no autocast; the scaler is disabled (a pass-through, as ours is).
  bf16  torch.autocast(DEV, dtype=torch.bfloat16) around forward + loss; no loss scaling.
  fp16  torch.autocast(DEV, dtype=torch.float16) around forward + loss, with the dynamic loss
        scaler torch.amp.GradScaler(DEV) (init scale 2^16, growth interval 2000: ours' too).

Devices (--device, default cpu):
  cpu     everything on the CPU, with --threads threads (torch.set_num_threads).
  cuda, cuda:N  the model, the data, the gradients and the Adam state on that NVIDIA GPU
          (torch.cuda.set_device(N); cuda = cuda:0); --threads still sets the CPU threads.
          Each step still reads the loss (loss.item(), a device sync) as ours does, and
          torch.cuda.synchronize() runs before the clock is read at every step boundary, so a
          step's time is its whole device time (step_cpu_ms then includes the host's waiting).
          torch.cuda.reset_peak_memory_stats() runs before each run and
          torch.cuda.max_memory_allocated() after it: "peak_device_bytes" (the table's dev_MiB).
          The JSON adds the GPU's name (torch.cuda.get_device_name), torch.version.cuda,
          torch.backends.cudnn.version() and the TF32 switches in effect. cuDNN autotuning
          (torch.backends.cudnn.benchmark) stays off, torch's default; Adam is torch's default
          implementation for CUDA tensors (foreach, not fused). --cudnn-benchmark turns the
          autotuning on.
  A device that cannot be used (a torch without CUDA, no usable GPU, cuda:N past the last GPU,
  a GPU that fails its first allocation) is bad usage: one line on stderr, exit status 2.
Options (resnet50's JSON records "image_size", "channels_last", "cudnn_benchmark" and
"compile"/"compiled" always; the other workloads' JSON records only the options given, so without
them it is what it always was):
  --batch-size N     instead of the workload's batch (seed-mlp 256, cnn 128, resnet50 128); the
                     cnn epoch is then ceil(60000 / N) steps.
  --image-size N     resnet50 only: the images' height and width, 32 to 4096 (default 224).
  --channels-last    cnn and resnet50: the model and the input batch converted with
                     memory_format=torch.channels_last (NHWC: cuDNN's Tensor-Core layout).
  --cudnn-benchmark  torch.backends.cudnn.benchmark = True: cuDNN times its algorithms for each
                     new shape in the first (warm-up) step and keeps the fastest.
  --compile          times torch.compile(model) (inductor, default mode; the optimizer, scaler
                     and norm stay eager), as peer_gpt.py --time --compile does: one extra
                     untimed step first compiles it (its wall time is "compile_seconds"), then
                     the warm-up and timed steps; "compiled": true. If compiling (or a compiled
                     step) fails, "compiled" is false with "compile_error", one line goes to
                     stderr, and the times are the eager model's, timed afresh.

--matmul-precision highest|high|medium (default highest; the names of mixprec's flag, recorded in
the JSON as "matmul_precision"): f32 matrix products and convolutions.
  highest  true f32: torch.set_float32_matmul_precision("highest") (so
           torch.backends.cuda.matmul.allow_tf32 = False) and torch.backends.cudnn.allow_tf32 =
           False (torch's default for cuDNN is True: this turns TF32 convolutions off).
  high, medium  TF32 Tensor Cores on the GPU: torch.set_float32_matmul_precision(NAME) (so
           cuda.matmul.allow_tf32 = True) and cudnn.allow_tf32 = True.
  On the CPU the default changes nothing; high or medium there is
  torch.set_float32_matmul_precision(NAME) alone (oneDNN's reduced-precision f32 products:
  medium = bf16 on CPUs that have it; mixprec's high on a CPU is highest, torch's may not be).

A precision whose first step is slower than --slow-step-s (16-bit autocast on CPUs without
AVX512_BF16/AVX512_FP16 can be ~100x slower than fp32) is not skipped but shortened: at most one
warm-up step and fewer timed steps (at least 2) so the run fits in about --budget-s seconds; the
JSON's "shortened" then says why (false otherwise). --real-epoch stops after --epoch-budget-s and
extrapolates the epoch from the batches done, also noted in "shortened".

Each JSON result also has the torch version, the threads, torch's BLAS/oneDNN build, "device"
and "matmul_precision", and max_rss_bytes: the peak resident memory of this whole process up to
the end of that run (runs in one process accumulate; bench/compare.sh starts one process per
run).
"""
import argparse
import collections
import gc
import gzip
import json
import math
import os
import re
import resource
import statistics
import sys
import time
import warnings

torch = nn = None  # imported in main(), after the thread environment is set


FASHION_DIR = "/usr/share/datasets/fashion-mnist"
FASHION_TRAIN_IMAGES = 60000
CPU_FLAG_PREFIXES = ("avx512", "amx")
CPU_FLAGS_EXACT = ("avx2", "f16c", "fma")
PRECISIONS = ("fp32", "bf16", "fp16")
MATMUL_PRECISIONS = ("highest", "high", "medium")
DEVICE_RE = re.compile(r"^(cpu|cuda(:[0-9]+)?)$")
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
    """Imports torch with every thread pool it may use (OpenMP, MKL, and OpenBLAS, which a
    generic-BLAS torch calls for fp32 GEMMs and which ignores torch.set_num_threads) capped at
    `threads`; an explicit environment setting wins."""
    global torch, nn
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, str(threads))
    try:
        import torch as torch_module
        import torch.nn as nn_module
    except ImportError:
        sys.exit("peer_pytorch.py: torch is not importable from %s; make the peer venv with "
                 "bench/setup-peer.sh and run this with its bin/python" % sys.executable)
    torch, nn = torch_module, nn_module
    torch.set_num_threads(threads)


def blas_library():
    """Which BLAS library torch's fp32 GEMMs use: "mkl" when torch was built with MKL (PyPI's
    x86 wheels are), else the file name of the libblas/openblas/blis this process mapped after
    one matmul. Debian's torch is built against the generic libblas.so.3, which is netlib's
    unoptimized reference BLAS (~100x slower) unless an optimized alternative is installed."""
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


def torch_build():
    """The parts of torch.__config__.show() that decide CPU speed: BLAS, MKL and oneDNN versions,
    the CPU code path torch dispatches to, and the parallel backend."""
    text = torch.__config__.show()

    def find(pattern):
        m = re.search(pattern, text)
        return m.group(1).strip() if m else None

    capability = None
    try:
        capability = torch.backends.cpu.get_cpu_capability()
    except AttributeError:  # torch < 2.1
        capability = find(r"CPU capability usage: (\S+)")
    return {
        "blas_info": find(r"BLAS_INFO=([^,\s]+)"),
        "mkl": find(r"Math Kernel Library Version ([0-9.]+)"),
        "onednn": find(r"MKL-DNN (v[0-9.]+)"),
        "cpu_capability": capability,
        "openmp": "USE_OPENMP=ON" in text,
    }


# --- devices -------------------------------------------------------------------------------------
def device_arg(text):
    """argparse type of --device: cpu, cuda or cuda:N (checked against the machine later)."""
    if not DEVICE_RE.match(text):
        raise argparse.ArgumentTypeError("invalid --device %r: give cpu, cuda or cuda:N" % text)
    return text


def _one_line(text):
    """The first non-empty line of `text`, whitespace collapsed."""
    for line in str(text).splitlines():
        if line.strip():
            return " ".join(line.split())
    return ""


def setup_device(spec, matmul_precision, prog):
    """The torch.device of --device `spec` after checking it can be used, with --matmul-precision
    applied; exits with one line on stderr and status 2 (bad usage) when it cannot be used."""
    def unusable(why):
        sys.stderr.write("%s: --device %s cannot be used: %s\n" % (prog, spec, why))
        sys.exit(2)

    if spec == "cpu":
        if matmul_precision != "highest":  # torch's CPU default is highest: nothing to change
            torch.set_float32_matmul_precision(matmul_precision)
        return torch.device("cpu")
    index = int(spec.split(":", 1)[1]) if ":" in spec else 0
    if torch.version.cuda is None or not torch.backends.cuda.is_built():
        unusable("this torch (%s) was built without CUDA" % torch.__version__)
    with warnings.catch_warnings(record=True) as caught:  # e.g. "CUDA initialization: ..."
        warnings.simplefilter("always")
        available = torch.cuda.is_available()
        count = torch.cuda.device_count() if available else 0
    if not available or count == 0:
        why = "no usable CUDA GPU (torch.cuda.is_available() is False"
        notes = [_one_line(w.message) for w in caught if _one_line(w.message)]
        if notes:
            why += ": " + notes[0]
        if os.environ.get("CUDA_VISIBLE_DEVICES") is not None:
            why += "; CUDA_VISIBLE_DEVICES=%r" % os.environ["CUDA_VISIBLE_DEVICES"]
        unusable(why + ")")
    if index >= count:
        unusable("cuda:%d is out of range: this machine shows %d GPU%s (cuda:0%s)"
                 % (index, count, "" if count == 1 else "s",
                    "" if count == 1 else "..cuda:%d" % (count - 1)))
    device = torch.device("cuda", index)
    try:
        torch.cuda.set_device(device)
        torch.zeros(1, device=device).add_(1).item()  # the first allocation and kernel
    except Exception as e:  # noqa: BLE001  (a driver/runtime/architecture mismatch, a busy GPU)
        unusable("%s: %s" % (type(e).__name__, _one_line(e)))
    tf32 = matmul_precision != "highest"
    torch.set_float32_matmul_precision(matmul_precision)  # cuBLAS: highest = IEEE f32, else TF32
    if torch.backends.cuda.matmul.allow_tf32 != tf32:  # a torch where the two are not linked
        torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32  # cuDNN convolutions (torch's default is True)
    return device


def device_sync(device):
    """A function that waits for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def reset_device_memory(device):
    """Before a run: frees the cached blocks of earlier runs and restarts the peak counter."""
    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def device_info(device, matmul_precision, peak=True):
    """The JSON fields of the device: always "device" and "matmul_precision"; on a GPU also its
    name, torch.version.cuda, cuDNN's version, the TF32 switches and (peak=True)
    peak_device_bytes = torch.cuda.max_memory_allocated() since reset_device_memory."""
    info = {"device": str(device), "matmul_precision": matmul_precision}
    if device.type != "cuda":
        return info

    def read(get):
        try:
            return get()
        except Exception as e:  # noqa: BLE001  (torch >= 2.9 refuses mixed legacy/new settings)
            return "unreadable: %s" % _one_line(e)

    info.update({
        "device_name": torch.cuda.get_device_name(device),
        "device_capability": list(torch.cuda.get_device_capability(device)),
        "cuda_version": torch.version.cuda,
        "cudnn_version": read(torch.backends.cudnn.version),
        "tf32": {"cuda_matmul": read(lambda: torch.backends.cuda.matmul.allow_tf32),
                 "cudnn": read(lambda: torch.backends.cudnn.allow_tf32),
                 "float32_matmul_precision": read(torch.get_float32_matmul_precision)},
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
    })
    if peak:
        torch.cuda.synchronize(device)
        info["peak_device_bytes"] = torch.cuda.max_memory_allocated(device)
    return info


# --- workloads -----------------------------------------------------------------------------------
# A workload: its model factory, batch size, a maker of one synthetic batch (inputs, targets), and
# the steps of one real epoch (None: no data set). The loss is cross-entropy over the last axis of
# the output, so a future "gpt" workload (token ids in, [batch, seq, vocab] logits out, targets
# [batch, seq]) needs only an entry here with its factory and batch maker.
Workload = collections.namedtuple("Workload", "build batch_size make_batch steps_per_epoch")


def seed_mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 4096), nn.ReLU(),
                         nn.Linear(4096, 10))


def fashion_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


# ResNet-50 (torchvision's resnet50, v1.5). The layout is data, so that the parameter count can be
# computed from it without torch (resnet50_parameter_count) and checked against the built model.
RESNET50_PARAMETERS = 25557032
RESNET50_CLASSES = 1000
RESNET50_STEM = 64  # conv1's output channels
RESNET50_STAGES = ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2))  # (width, blocks, stride)
RESNET_EXPANSION = 4  # a Bottleneck's output channels: width x 4


def resnet50_layers():
    """The parametrised layers of ResNet-50 in torchvision's order, as (name, kind, shape):
    ("conv", (in, out, kernel, stride, padding)), ("bn", (channels,)), ("fc", (in, out))."""
    layers = [("conv1", "conv", (3, RESNET50_STEM, 7, 2, 3)), ("bn1", "bn", (RESNET50_STEM,))]
    inplanes = RESNET50_STEM
    for stage, (width, blocks, stride) in enumerate(RESNET50_STAGES, 1):
        out = width * RESNET_EXPANSION
        for b in range(blocks):
            name = "layer%d.%d." % (stage, b)
            s = stride if b == 0 else 1
            layers += [(name + "conv1", "conv", (inplanes, width, 1, 1, 0)),
                       (name + "bn1", "bn", (width,)),
                       (name + "conv2", "conv", (width, width, 3, s, 1)),  # v1.5: stride here
                       (name + "bn2", "bn", (width,)),
                       (name + "conv3", "conv", (width, out, 1, 1, 0)),
                       (name + "bn3", "bn", (out,))]
            if b == 0:  # every stage's first block changes the channels (and stage 2-4 the size)
                layers += [(name + "downsample.0", "conv", (inplanes, out, 1, s, 0)),
                           (name + "downsample.1", "bn", (out,))]
            inplanes = out
    layers.append(("fc", "fc", (inplanes, RESNET50_CLASSES)))
    return layers


def resnet50_parameter_count():
    """The trainable parameters of resnet50_layers(): convolutions without bias, BatchNorm's
    weight and bias, the Linear's weight and bias."""
    count = 0
    for _, kind, shape in resnet50_layers():
        if kind == "conv":
            cin, cout, k = shape[:3]
            count += cin * cout * k * k
        elif kind == "bn":
            count += 2 * shape[0]
        else:
            count += shape[0] * shape[1] + shape[1]
    return count


def resnet50():
    """ResNet-50 built from resnet50_layers() with torchvision's module names (conv1, bn1, relu,
    maxpool, layer1..layer4 of Bottlenecks, avgpool, fc) and its initialisation (Kaiming-normal
    fan-out convolutions, BatchNorm 1 and 0, the Linear's default)."""
    class Bottleneck(nn.Module):
        def __init__(self, inplanes, width, stride, downsample):
            super().__init__()
            out = width * RESNET_EXPANSION
            self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(width)
            self.conv3 = nn.Conv2d(width, out, 1, bias=False)
            self.bn3 = nn.BatchNorm2d(out)
            self.relu = nn.ReLU(inplace=True)
            self.downsample = (nn.Sequential(nn.Conv2d(inplanes, out, 1, stride=stride,
                                                       bias=False), nn.BatchNorm2d(out))
                               if downsample else None)

        def forward(self, x):
            identity = x if self.downsample is None else self.downsample(x)
            out = self.relu(self.bn1(self.conv1(x)))
            out = self.relu(self.bn2(self.conv2(out)))
            out = self.bn3(self.conv3(out))
            return self.relu(out + identity)

    class ResNet50(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, RESNET50_STEM, 7, stride=2, padding=3, bias=False)
            self.bn1 = nn.BatchNorm2d(RESNET50_STEM)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
            inplanes = RESNET50_STEM
            for stage, (width, blocks, stride) in enumerate(RESNET50_STAGES, 1):
                layer = [Bottleneck(inplanes, width, stride, True)]
                inplanes = width * RESNET_EXPANSION
                layer += [Bottleneck(inplanes, width, 1, False) for _ in range(blocks - 1)]
                setattr(self, "layer%d" % stage, nn.Sequential(*layer))
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(inplanes, RESNET50_CLASSES)
            for m in self.modules():
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def forward(self, x):
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
            return self.fc(torch.flatten(self.avgpool(x), 1))

    model = ResNet50()
    count = sum(p.numel() for p in model.parameters())
    assert count == resnet50_parameter_count() == RESNET50_PARAMETERS, (
        "resnet50 has %d parameters; its layer list gives %d, torchvision's has %d"
        % (count, resnet50_parameter_count(), RESNET50_PARAMETERS))
    # The same layers, in the same order, as the list the count comes from.
    convs = [(n, tuple(m.weight.shape)) for n, m in model.named_modules()
             if isinstance(m, (nn.Conv2d, nn.Linear))]
    expect = [(n, (sh[1], sh[0], sh[2], sh[2]) if kind == "conv" else (sh[1], sh[0]))
              for n, kind, sh in resnet50_layers() if kind != "bn"]
    assert convs == expect, "resnet50's layers differ from resnet50_layers()"
    return model


def classification_batch(sample_shape, classes=10):
    """Standard-normal inputs and uniform labels, as `mixprec bench` makes them."""
    def make(batch):
        return torch.randn(batch, *sample_shape), torch.randint(0, classes, (batch,))
    return make


WORKLOADS = {
    "seed-mlp": Workload(seed_mlp, 256, classification_batch((1024,)), None),
    # 469 = ceil(60000 / 128): the real epoch's batches (the last one partial)
    "cnn": Workload(fashion_cnn, 128, classification_batch((1, 28, 28)), 469),
    # make_batch None: [3, S, S] images of S = --image-size, 1000 classes (made in run())
    "resnet50": Workload(resnet50, 128, None, None),
}
ALL_WORKLOADS = ("seed-mlp", "cnn")  # --workload all: resnet50 is too heavy for a CPU run
CONV_WORKLOADS = ("cnn", "resnet50")  # those --channels-last applies to
DEFAULT_IMAGE_SIZE = 224


# --- the training step ---------------------------------------------------------------------------
def total_grad_norm(params):
    """The total 2-norm of the gradients, computed the way ours is every step (nothing clipped).
    torch >= 2.6 has get_total_norm, which computes the norm only, as ours does. Older torch
    only has clip_grad_norm_, which with max_norm=inf still multiplies every gradient by 1.0 (an
    extra read+write pass ours skips when nothing is clipped)."""
    grads = [p.grad for p in params if p.grad is not None]
    if hasattr(nn.utils, "get_total_norm"):
        return nn.utils.get_total_norm(grads)
    return nn.utils.clip_grad_norm_(params, math.inf)


def grad_norm_method():
    return ("torch.nn.utils.get_total_norm" if hasattr(nn.utils, "get_total_norm")
            else "torch.nn.utils.clip_grad_norm_(max_norm=inf)")


class Step:
    """One training step in the order `mixprec bench` (and its Trainer) runs it: forward + loss
    under the precision's autocast, scaled backward, unscale, total gradient norm, optimizer step
    through the scaler, scaler update, zero_grad."""

    LOWER = {"bf16": "bfloat16", "fp16": "float16"}

    def __init__(self, model, precision, device_type="cpu"):
        self.model = model
        self.device_type = device_type  # "cpu" or "cuda": autocast's and the scaler's
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.opt = torch.optim.Adam(self.params, lr=1e-3)
        self.loss_fn = nn.CrossEntropyLoss()
        self.lower = getattr(torch, self.LOWER[precision]) if precision in self.LOWER else None
        self.scaler = None  # fp32 and bf16: none, as ours' disabled scaler passes everything through
        if precision == "fp16":
            if not hasattr(torch, "amp") or not hasattr(torch.amp, "GradScaler"):
                sys.exit("peer_pytorch.py: fp16 needs torch.amp.GradScaler (torch >= 2.3); this "
                         "is torch %s (make the peer venv with bench/setup-peer.sh)"
                         % torch.__version__)
            # init 2^16, x2 per 2000 clean, x0.5
            self.scaler = torch.amp.GradScaler(device_type)
        self.checked = False

    def loss(self, out, y):
        """Cross-entropy over the output's last axis (a classifier's [batch, classes], or a
        language model's [batch, seq, vocab] against [batch, seq] targets)."""
        return self.loss_fn(out.reshape(-1, out.shape[-1]), y.reshape(-1))

    def forward_loss(self, x, y):
        if self.lower is None:
            return self.loss(self.model(x), y)
        with torch.autocast(self.device_type, dtype=self.lower):
            out = self.model(x)
            # A torch without autocast for this dtype here warns and runs fp32: refuse that.
            if not self.checked and out.dtype != self.lower:
                sys.exit("peer_pytorch.py: torch %s did not autocast the model to %s on %s "
                         "(its output is %s), so its numbers would be fp32's"
                         % (torch.__version__, self.lower, self.device_type, out.dtype))
            self.checked = True
            return self.loss(out, y)

    def __call__(self, x, y):
        loss = self.forward_loss(x, y)
        value = loss.item()  # ours reads the loss here too (on a GPU: a sync, as ours')
        if self.scaler is None:
            loss.backward()
            total_grad_norm(self.params)
            self.opt.step()
        else:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.opt)
            total_grad_norm(self.params)  # of the unscaled gradients, as ours
            self.scaler.step(self.opt)  # skipped when a gradient is inf/NaN
            self.scaler.update()
        # set_to_none=True (torch's default): the gradients are dropped and backward allocates
        # them anew, which is what ours' Optimizer::zero_grad does (it resets every grad to an
        # empty tensor); zeroing in place would add a memset pass ours does not have.
        self.opt.zero_grad(set_to_none=True)
        return value


def time_one(step, x, y, sync=None):
    """(wall ms, process CPU ms over all threads) of one step; `sync` (a GPU's
    torch.cuda.synchronize) runs before the clock is read at both of its boundaries."""
    if sync:
        sync()
    c0, t0 = time.process_time(), time.perf_counter()
    step(x, y)
    if sync:
        sync()
    return (time.perf_counter() - t0) * 1e3, (time.process_time() - c0) * 1e3


def time_steps(step, x, y, warmup, steps, args, sync=None):
    """Per-step wall-clock and process-CPU milliseconds of the timed steps, the warm-up and timed
    step counts actually run, and the reason they were shortened (False if not). The first step
    (a warm-up one, or the first timed one when warmup is 0) is timed: when it is slower than
    --slow-step-s and the planned run would exceed --budget-s, warm-up drops to at most the one
    step done and the timed steps to what fits the budget (at least 2, at most as asked). `sync`:
    as time_one's (None on the CPU)."""
    first = time_one(step, x, y, sync)
    times, cpu = ([], []) if warmup > 0 else ([first[0]], [first[1]])
    first_s = first[0] / 1e3
    shortened = False
    planned_s = first_s * (warmup + steps)
    if first_s > args.slow_step_s and planned_s > args.budget_s:
        new_warmup = min(warmup, 1)
        fits = int(args.budget_s / first_s) - new_warmup
        new_steps = min(steps, max(2, fits))
        shortened = ("the first step took %.1f s (> %g s; %d+%d steps would take ~%.0f s): ran "
                     "%d warm-up + %d timed steps to stay within ~%g s"
                     % (first_s, args.slow_step_s, warmup, steps, planned_s, new_warmup,
                        new_steps, args.budget_s))
        warmup, steps = new_warmup, new_steps
    for _ in range(warmup - 1):  # the first warm-up step is done
        step(x, y)
    while len(times) < steps:
        wall, c = time_one(step, x, y, sync)
        times.append(wall)
        cpu.append(c)
    return times, cpu, warmup, steps, shortened


def read_idx(path):
    """An IDX file (gzip) as a uint8 numpy array with its declared shape."""
    import numpy as np
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def real_epoch(step, batch_size, budget_s, device):
    """(seconds, batches run, batches in the epoch) of one shuffled epoch over the Fashion-MNIST
    training set, stopped once `budget_s` seconds have passed. On a GPU each batch is copied to it
    inside the timed loop (as a data loader's would be), and the clock is read after a sync."""
    images = read_idx(os.path.join(FASHION_DIR, "train-images-idx3-ubyte.gz"))
    labels = read_idx(os.path.join(FASHION_DIR, "train-labels-idx1-ubyte.gz"))
    x_all = torch.from_numpy(images.astype("float32") / 255.0).unsqueeze(1)
    x_all = (x_all - 0.2860) / 0.3530  # the data set's mean / std, as the dataloader normalizes
    y_all = torch.from_numpy(labels.astype("int64"))
    perm = torch.randperm(x_all.shape[0])
    total = math.ceil(x_all.shape[0] / batch_size)
    sync = device_sync(device)
    done = 0
    sync()
    t0 = time.perf_counter()
    for i in range(0, x_all.shape[0], batch_size):
        idx = perm[i:i + batch_size]
        step(x_all[idx].to(device), y_all[idx].to(device))
        done += 1
        if time.perf_counter() - t0 > budget_s:  # each step's loss.item() has synced
            break
    sync()
    return time.perf_counter() - t0, done, total


def summarize_error(e, lines=3, limit=1000):
    """An exception as one string: its type and its first `lines` non-empty lines (without
    Dynamo's generic hints about TORCHDYNAMO_VERBOSE / TORCH_LOGS)."""
    text = [" ".join(x.split()) for x in str(e).splitlines()
            if x.strip() and "TORCHDYNAMO_VERBOSE" not in x and "TORCH_LOGS" not in x]
    return ("%s: %s" % (type(e).__name__, " | ".join(text[:lines])))[:limit]


def time_model(workload, precision, batch_size, args, compiled):
    """((the Step, time_steps' timings), compile fields) of one run on a fresh model: eager, or
    (compiled=True) through torch.compile after one untimed compiling step."""
    device = args.torch_device
    reset_device_memory(device)
    torch.manual_seed(0)
    wl = WORKLOADS[workload]
    model = wl.build().to(device)  # built on the CPU from the seed, so the weights are the CPU's
    model.train()
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    if compiled:
        model = torch.compile(model, backend="inductor")  # default mode
    step = Step(model, precision, device.type)
    make_batch = wl.make_batch or classification_batch((3, args.image_size, args.image_size),
                                                       RESNET50_CLASSES)
    x, y = make_batch(batch_size)  # made on the CPU: the same batch on every device
    x, y = x.to(device), y.to(device)
    if args.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    sync = device_sync(device) if device.type == "cuda" else None
    extra = {}
    if compiled:  # the compiling step: not a warm-up step, so it cannot shorten the run
        extra["compile_seconds"] = time_one(step, x, y, sync)[0] / 1e3
    return (step, time_steps(step, x, y, args.warmup, args.steps, args, sync=sync)), extra


def compiled_or_eager(time_model_fn, want_compile, script, keep=()):
    """(time_model_fn's result, the JSON's compile fields). time_model_fn(compiled) returns
    (result, compile fields). With want_compile, the compiled model is timed first; if compiling
    or a compiled step fails, the error goes to "compile_error" and one stderr line, and the
    eager model is timed afresh. Exceptions of the types in `keep` are not caught."""
    fields = {"compile": want_compile, "compiled": False}
    result = None
    if want_compile:
        try:
            result, extra = time_model_fn(True)
            fields.update(extra, compiled=True, compile_backend="inductor", compile_mode="default")
        except keep:
            raise
        except Exception as e:  # noqa: BLE001  (dynamo/inductor errors, a missing compiler, ...)
            fields["compile_error"] = summarize_error(e)
            print("%s: torch.compile failed (%s); timing the eager model"
                  % (script, summarize_error(e, lines=1, limit=300)), file=sys.stderr)
        if result is None:  # outside the except block, so the failed model can be freed
            try:
                torch._dynamo.reset()
            except Exception:  # noqa: BLE001
                pass
    if result is None:
        result, _ = time_model_fn(False)
    return result, fields


def run(workload, precision, args):
    device = args.torch_device
    wl = WORKLOADS[workload]
    batch_size = args.batch_size or wl.batch_size
    (step, timed), compile_fields = compiled_or_eager(
        lambda compiled: time_model(workload, precision, batch_size, args, compiled),
        args.compile, "peer_pytorch.py")
    times, cpu, warmup, steps, shortened = timed
    result = {
        "framework": "pytorch",
        "version": torch.__version__,
        "workload": workload,
        "precision": precision,
        "batch_size": batch_size,
        "threads": torch.get_num_threads(),
        "steps": steps,
        "warmup": warmup,
        "shortened": shortened,
        "step_ms": {"median": statistics.median(times), "min": min(times), "max": max(times)},
        "step_cpu_ms": {"median": statistics.median(cpu)},
        "grad_norm": grad_norm_method(),
        "blas": BLAS,
        "torch_build": torch_build(),
        "cpu_flags": cpu_flags(),
        "load_average": list(os.getloadavg()),
    }
    # The options: resnet50 records them all, the other workloads those given (so their JSON
    # without the options is what it always was).
    images = workload == "resnet50"
    if images:
        result["image_size"] = args.image_size
        result["samples_per_second"] = batch_size / (result["step_ms"]["median"] / 1e3)
    if images or args.channels_last:
        result["channels_last"] = args.channels_last
    if images or args.cudnn_benchmark:
        result["cudnn_benchmark"] = torch.backends.cudnn.benchmark
    if images or args.compile:
        result.update(compile_fields)
    steps_per_epoch = wl.steps_per_epoch
    if steps_per_epoch and batch_size != wl.batch_size:  # cnn: the training set in other batches
        steps_per_epoch = math.ceil(FASHION_TRAIN_IMAGES / batch_size)
    if steps_per_epoch:
        result["epoch_seconds"] = result["step_ms"]["median"] * steps_per_epoch / 1e3
        result["epoch_seconds_source"] = "extrapolated"
        if args.real_epoch:
            seconds, done, total = real_epoch(step, batch_size, args.epoch_budget_s, device)
            result["epoch_seconds"] = seconds * total / done
            result["epoch_batches"] = done
            result["epoch_seconds_source"] = "measured"
            if done < total:
                result["epoch_seconds_source"] = "extrapolated from %d of %d real batches" % (
                    done, total)
                note = ("the real epoch stopped after %d of %d batches (%.0f s > --epoch-budget-s "
                        "%g)" % (done, total, seconds, args.epoch_budget_s))
                result["shortened"] = "; ".join(s for s in (shortened, note) if s)
    # ru_maxrss is in KiB on Linux: the whole process's peak so far (python, torch, data).
    result["max_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result.update(device_info(device, args.matmul_precision))
    return result


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """Bad usage: one line on stderr and exit status 2 (argparse would print the usage too)."""
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def main():
    p = Parser(description=__doc__.split("\n\n")[0],
                                epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--workload", choices=list(WORKLOADS) + ["all"], default="all",
                   help="default all: " + " and ".join(ALL_WORKLOADS) + " (not resnet50)")
    p.add_argument("--precision", choices=list(PRECISIONS) + ["all"], default="all")
    p.add_argument("--steps", type=int, default=20, help="timed steps (default 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up steps (default 3)")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads (default 2)")
    p.add_argument("--real-epoch", action="store_true",
                   help="cnn: also time one real epoch on Fashion-MNIST from " + FASHION_DIR)
    p.add_argument("--slow-step-s", type=float, default=2.0,
                   help="a first step slower than this may shorten the run (default 2)")
    p.add_argument("--budget-s", type=float, default=120.0,
                   help="wall-clock seconds a slow run is shortened to fit (default 120)")
    p.add_argument("--epoch-budget-s", type=float, default=600.0,
                   help="--real-epoch stops after this many seconds and extrapolates (default 600)")
    p.add_argument("--device", type=device_arg, default="cpu",
                   help="cpu (default), cuda or cuda:N (an NVIDIA GPU; see Devices below)")
    p.add_argument("--matmul-precision", choices=MATMUL_PRECISIONS, default="highest",
                   help="f32 GEMMs/convolutions: highest (true f32; default), high or medium "
                        "(TF32 on a GPU); see below")
    p.add_argument("--batch-size", type=int, default=None,
                   help="instead of the workload's (seed-mlp 256, cnn 128, resnet50 128)")
    p.add_argument("--image-size", type=int, default=None,
                   help="resnet50: the images' height and width, 32 to 4096 (default %d)"
                        % DEFAULT_IMAGE_SIZE)
    p.add_argument("--channels-last", action="store_true",
                   help="cnn, resnet50: model and inputs in torch.channels_last (NHWC)")
    p.add_argument("--cudnn-benchmark", action="store_true",
                   help="torch.backends.cudnn.benchmark = True (cuDNN autotuning)")
    p.add_argument("--compile", action="store_true",
                   help="time torch.compile(model) (inductor); a failure falls back to eager "
                        "and is reported as compile_error")
    p.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    args = p.parse_args()
    if args.steps < 1 or args.warmup < 0 or args.threads < 1:
        p.error("--steps and --threads must be >= 1 and --warmup >= 0")
    if args.slow_step_s <= 0 or args.budget_s <= 0 or args.epoch_budget_s <= 0:
        p.error("--slow-step-s, --budget-s and --epoch-budget-s must be > 0")
    if args.real_epoch and not os.path.isdir(FASHION_DIR):
        p.error("--real-epoch needs the Fashion-MNIST files in " + FASHION_DIR)
    if args.batch_size is not None and args.batch_size < 1:
        p.error("--batch-size must be >= 1")
    if args.image_size is not None and args.workload != "resnet50":
        p.error("--image-size is for --workload resnet50 only")
    if args.image_size is not None and not 32 <= args.image_size <= 4096:
        p.error("--image-size must be in [32, 4096]")
    if args.image_size is None:
        args.image_size = DEFAULT_IMAGE_SIZE
    if args.channels_last and args.workload not in CONV_WORKLOADS:
        p.error("--channels-last is for the convolutional workloads (%s)"
                % ", ".join(CONV_WORKLOADS))

    import_torch(args.threads)
    args.torch_device = setup_device(args.device, args.matmul_precision, p.prog)
    if args.cudnn_benchmark:
        torch.backends.cudnn.benchmark = True
    global BLAS
    BLAS = blas_library()
    if reference_blas(BLAS):
        print("peer_pytorch.py: WARNING: torch's fp32 GEMMs use the reference BLAS %s (slow, "
              "not a fair peer); use torch from PyPI (bench/setup-peer.sh)" % BLAS,
              file=sys.stderr)
    workloads = list(ALL_WORKLOADS) if args.workload == "all" else [args.workload]
    precisions = list(PRECISIONS) if args.precision == "all" else [args.precision]
    results = [run(w, pr, args) for w in workloads for pr in precisions]

    if args.json:
        json.dump(results, sys.stdout, indent=2)
        print()
        return
    build = torch_build()
    print("pytorch %s (python %s), threads %d, blas %s, mkl %s, onednn %s, cpu path %s\n"
          "cpu flags: %s" % (torch.__version__, sys.version.split()[0], args.threads, BLAS,
                             build["mkl"], build["onednn"], build["cpu_capability"],
                             " ".join(cpu_flags())))
    gpu = args.torch_device.type == "cuda"
    if gpu:
        r0 = results[0]
        print("device %s: %s (capability %s), cuda %s, cudnn %s, matmul precision %s (tf32: "
              "matmul %s, cudnn %s)" % (
                  r0["device"], r0["device_name"], ".".join(map(str, r0["device_capability"])),
                  r0["cuda_version"], r0["cudnn_version"], r0["matmul_precision"],
                  r0["tf32"]["cuda_matmul"], r0["tf32"]["cudnn"]))
    elif args.matmul_precision != "highest":
        print("matmul precision %s" % args.matmul_precision)
    print("%-9s %-5s %6s %10s %10s %10s %10s %8s %9s%s" % (
        "workload", "prec", "batch", "median_ms", "min_ms", "max_ms", "cpu_ms", "epoch_s",
        "rss_MiB", " %9s" % "dev_MiB" if gpu else ""))
    for r in results:
        ms = r["step_ms"]
        epoch = "%.1f" % r["epoch_seconds"] if "epoch_seconds" in r else "-"
        print("%-9s %-5s %6d %10.2f %10.2f %10.2f %10.2f %8s %9.0f%s" % (
            r["workload"], r["precision"], r["batch_size"], ms["median"], ms["min"], ms["max"],
            r["step_cpu_ms"]["median"], epoch, r["max_rss_bytes"] / 2**20,
            " %9.0f" % (r["peak_device_bytes"] / 2**20) if gpu else ""))
    for r in results:
        options = (["images %dx%d, %.1f images/s" % (r["image_size"], r["image_size"],
                                                     r["samples_per_second"])]
                   if "image_size" in r else [])
        options += [name for key, name in (("channels_last", "channels-last"),
                                           ("cudnn_benchmark", "cudnn.benchmark")) if r.get(key)]
        if r.get("compiled"):
            options.append("torch.compile (compiled in %.1f s)" % r["compile_seconds"])
        if options:
            print("note: %s %s: %s" % (r["workload"], r["precision"], ", ".join(options)))
        if "compile_error" in r:
            print("note: %s %s: torch.compile failed, these are the eager model's times: %s"
                  % (r["workload"], r["precision"], r["compile_error"]))
        if r["shortened"]:
            print("note: %s %s shortened: %s" % (r["workload"], r["precision"], r["shortened"]))
    print("load average: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
