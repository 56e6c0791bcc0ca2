#!/usr/bin/env python3
"""PyTorch peer of mixprec's byte-level GPT (`--model gpt-mini`), on the CPU or (--device cuda) an
NVIDIA GPU: the same model, started from the same weights, trained on the same batches with the
same step, optimizer and schedule, so bench/compare_gpt.sh can set validation loss and tokens/s
side by side.

Usage: peer_gpt.py --train --init INIT.safetensors --max-steps N [model, data and step flags] [--json]
       peer_gpt.py --time [--init FILE] [--steps N] [--warmup W] [--batch-size B] [--compile]
                          [--vocab V] [--json]
       peer_gpt.py --check-forward --init FILE [--batch-size B] [--seed S] [--eval] [--json]
   each also takes [--device cpu|cuda|cuda:N] [--matmul-precision highest|high|medium]
Typical use (the weights written by `mixprec train ... --save-initial-weights init.safetensors`):
  build-peer/bin/python bench/peer_gpt.py --train --init init.safetensors --precision fp32 \\
      --max-steps 300 --batch-size 16 --optimizer adamw --weight-decay 0.1 \\
      --no-decay bias,norm,embedding --clip 1 --scheduler cosine --json
A GPT-2-small-shaped step on a GPU (as `mixprec bench --model gpt-mini --device cuda` with the
same --layers/--heads/--width/--context/--batch-size; the vocabulary stays gpt-mini's 256):
  python bench/peer_gpt.py --time --device cuda --precision bf16 --layers 12 --heads 12 \\
      --width 768 --context 1024 --batch-size 8 [--compile] --json
(build-peer/ is the venv bench/setup-peer.sh makes: torch 2.x and numpy from PyPI; the
safetensors file is parsed here, so the safetensors package is not needed).

The model (src/nn/gpt.cpp, src/nn/transformer.cpp), with the parameter names of mixprec's state
dict, so the file loads by name (any missing, extra or mis-shaped tensor is an error):
  h = tokens.weight[ids] + positions.weight[0..T); dropout
  per block i (blocks.i.*): h = h + drop(attn(ln1(h))), then h = h + drop(proj(gelu_tanh(fc(ln2(h)))))
    attn: qkv_proj = Linear(d, 3d, bias) (rows q, k, v), out_proj = Linear(d, d, bias); heads of
      d / heads (an --init file of older mixprec versions, with q_proj, k_proj, v_proj, loads:
      their rows are concatenated);
          causal scaled_dot_product_attention (scale 1/sqrt(head_dim))
  logits = ln_f(h) @ tokens.weight^T (tied head, no bias). LayerNorm eps 1e-5; vocabulary 256
  (the bytes; --vocab V, --time only, changes it: mixprec's GPT models are all 256, so compare
  with the default).
--context/--layers/--heads/--width default to gpt-mini's 128/4/4/128 (0 = that default, as
mixprec's flags); the file's shapes must agree, and --heads must be the run's (the file cannot tell).

The data (src/data/text_corpus.cpp, src/data/text_windows.cpp, src/train/run_data.cpp): --data
text:PATH[,PATH...] (default Debian's /usr/share/games/fortunes) loaded as load_text_corpus does
(a directory gives its regular files in sorted name order, skipping *.dat and files already read
through another name); the last floor(n * --val-fraction) bytes are validation. Training batch b of
epoch e (0-based) holds the windows starting at tests/python/text_windows.py's
window_starts(seed, e, b, B, batches_per_epoch, n_train, T) (imported, not copied), batches_per_epoch
= ceil(--limit-train / B) or max(1, (n_train - 1) / (T * B)). Validation: the consecutive windows at
0, T, 2T, ... of the validation text, B per batch, at most ceil(--limit-test / B) batches; its loss
is the mean cross-entropy over every predicted byte (batch means weighted by their tokens, summed
in double), in eval mode under the precision's autocast, after every epoch as mixprec does.

The step (src/train/train_step.cpp), as mixprec's Trainer runs it: forward + loss under autocast
(the loss in f32 on the logits), loss / accum, scaled backward (fp16), unscale, global gradient norm
(clipped to --clip when > 0: torch.nn.utils.clip_grad_norm_, whose coefficient max/(norm + 1e-6) is
ours), optimizer step through the scaler (skipped on Inf/NaN), scaler update, schedule step,
zero_grad. Adam / AdamW: betas 0.9/0.999, eps 1e-8, L2 (adam) or decoupled (adamw) weight decay;
--no-decay bias,norm,embedding makes the two parameter groups of optim::weight_decay_groups.
--scheduler cosine: lr_t = lr * (1 + cos(pi t / S)) / 2 in double, rounded to f32 (ours), t = the
applied optimizer steps (a step the scaler skips does not advance it), S = min(max(1,
ceil(batches_per_epoch / accum) * epochs), max_steps). --max-steps counts skipped steps too.
Precisions (weights and optimizer state stay f32; DEV is "cpu" or "cuda", per --device):
  fp32  no autocast.
  bf16  torch.autocast(DEV, dtype=torch.bfloat16) around forward + loss (and evaluation).
  fp16  torch.autocast(DEV, dtype=torch.float16) and torch.amp.GradScaler(DEV) (init scale
        2^16, growth interval --scaler-growth-interval, ours' dynamic scaling).

Modes:
  --train          train --max-steps steps (or --epochs epochs), evaluate after every epoch; prints
                   the final val_loss, bits_per_byte, a train-loss curve (mean loss of every
                   --log-every steps), training tokens/s (the training loop's wall clock with batch
                   assembly, evaluation excluded, as mixprec's train_seconds) and the environment.
  --time           time --steps training steps after --warmup on one fixed batch of random token ids
                   and targets (`mixprec bench --model gpt-mini`: batch 16 windows by default, Adam
                   lr 1e-3, no schedule, gradient norm computed, nothing clipped); median step ms and
                   tokens/s. A first step slower than --slow-step-s shortens the run to ~--budget-s.
                   --compile times torch.compile(model) (inductor, default mode; the optimizer,
                   scaler and norm stay eager) instead: one extra untimed step first compiles it
                   (its wall time is "compile_seconds"; the warm-up and timed steps follow as
                   without --compile), and the JSON says "compiled": true. If compiling (or a
                   compiled step) fails, the JSON has "compiled": false and "compile_error" (the
                   exception's type and first lines), one line goes to stderr, and the step times
                   are those of the eager model, timed afresh (exit status 0).
  --check-forward  one forward + backward on training batch 0 of epoch 0 from --init (no update):
                   the loss and the gradient norm, to set against the train_loss and grad_norm_max
                   of `mixprec train ... --max-steps 1 --batch-size B` (fp32: equal to ~1e-5);
                   --eval adds the validation loss of the initial weights.
Devices (--device, default cpu; bench/peer_pytorch.py's flag, same checks):
  cpu     everything on the CPU with --threads threads.
  cuda, cuda:N  the model, the batches (cut on the CPU, then copied), the gradients and the
          optimizer state on that NVIDIA GPU (cuda = cuda:0); --threads still sets the CPU
          threads. The loss and the gradient norm are read every step (device syncs, as ours),
          and torch.cuda.synchronize() runs before the clock is read at every step boundary
          (--time and --train) and at the ends of a --train epoch. The JSON adds the GPU's name,
          torch.version.cuda, cuDNN's version, the TF32 switches and "peak_device_bytes"
          (torch.cuda.max_memory_allocated() after the run; the peak counter is reset before it).
  A device that cannot be used (a torch without CUDA, no usable GPU, cuda:N past the last GPU, a
  GPU that fails its first allocation) is bad usage: one line on stderr, exit status 2.
--matmul-precision highest|high|medium (default highest; mixprec's flag's names, recorded as
"matmul_precision"): highest = true f32 (torch.set_float32_matmul_precision("highest"), so
torch.backends.cuda.matmul.allow_tf32 is False, and torch.backends.cudnn.allow_tf32 = False);
high and medium = TF32 Tensor Cores on a GPU (set_float32_matmul_precision(NAME), allow_tf32 and
cudnn.allow_tf32 True). On the CPU the default changes nothing, and high/medium are
set_float32_matmul_precision(NAME) alone (oneDNN; medium = bf16 products where the CPU has them).
--json prints one JSON object; results also carry the torch version, threads, BLAS/oneDNN build,
CPU flags, "device", "matmul_precision" and max_rss_bytes. Exit status: 0 on success, 1 on a
failure (a bad weights file, a diverged loss), 2 on bad usage (an unusable --device included).
"""
import argparse
import json
import math
import os
import resource
import statistics
import struct
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "python"))

import peer_pytorch as common  # noqa: E402  (cpu flags, torch import with threads, BLAS, timing)
from text_windows import window_starts  # noqa: E402  (the replayable window formula)

torch = nn = F = np = None  # imported in main(), after the thread environment is set

FORTUNES = "/usr/share/games/fortunes"
VOCAB = 256
GPT_MINI = {"context": 128, "layers": 4, "heads": 4, "width": 128}
PRECISIONS = ("fp32", "bf16", "fp16")
LOWER = {"bf16": "bfloat16", "fp16": "float16"}


class Failure(Exception):
    """A problem with the inputs (weights file, data) or the run: reported, exit status 1."""


def f32(x):
    """x rounded to the nearest f32, as a Python float (mixprec keeps lr etc. in f32)."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# --- data: load_text_corpus, split_text, TextWindows ---------------------------------------------
def load_text_corpus(paths):
    """(bytes, files): the files of `paths` concatenated, as data::load_text_corpus reads them."""
    if not paths:
        raise Failure("no data path given; pass text:PATH[,PATH...]")
    seen, files, chunks = set(), [], []

    def add_file(path, st):
        key = (st.st_dev, st.st_ino)
        if key in seen:
            return False
        seen.add(key)
        with open(path, "rb") as f:
            chunks.append(f.read())
        files.append(path)
        return True

    for path in paths:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise Failure("%s: no such file or directory" % path)
        if os.path.isdir(path):
            # std::sort on the names' bytes; for UTF-8 names that is code point order
            names = sorted(os.listdir(path), key=lambda s: os.fsencode(s))
            used = 0
            for name in names:
                if name.endswith(".dat"):
                    continue
                p = os.path.join(path, name)
                try:
                    s = os.stat(p)  # follows symlinks, like ::stat
                except OSError:
                    continue
                if not os.path.isfile(p):
                    continue
                used += add_file(p, s)
            if used == 0:
                raise Failure("%s: the directory holds no usable text file" % path)
        elif os.path.isfile(path):
            add_file(path, st)
        else:
            raise Failure("%s: is neither a regular file nor a directory" % path)
    data = b"".join(chunks)
    if not data:
        raise Failure("the corpus is empty")
    return data, files


def data_paths(spec):
    """The paths of a --data value: text:PATH[,PATH...] (or bare paths); empty -> the fortunes."""
    if not spec:
        return [FORTUNES]
    if spec.startswith("text:"):
        spec = spec[5:]
    return [p for p in spec.split(",") if p]


class TextData:
    """The training and validation text and the batches mixprec's TextWindows cut from them."""

    def __init__(self, args):
        corpus, self.files = load_text_corpus(data_paths(args.data))
        n = len(corpus)
        n_val = int(math.floor(n * args.val_fraction))
        self.n_bytes = n
        self.train = np.frombuffer(corpus[:n - n_val], dtype=np.uint8)
        self.val = np.frombuffer(corpus[n - n_val:], dtype=np.uint8)
        t, b = args.context, args.batch_size
        if len(self.train) < t + 1 or len(self.val) < t + 1:
            raise Failure("the text has %d bytes: %d for training and %d for validation, but a window "
                          "of --context %d needs %d in each" % (n, len(self.train), len(self.val),
                                                                t, t + 1))
        self.context, self.batch_size, self.seed = t, b, args.seed
        self.device = args.torch_device
        if args.limit_train > 0:
            self.batches_per_epoch = (args.limit_train + b - 1) // b
        else:
            self.batches_per_epoch = max(1, (len(self.train) - 1) // (t * b))
        all_windows = (len(self.val) - 1) // t
        val_batches = (all_windows + b - 1) // b
        if args.limit_test > 0:
            val_batches = min(val_batches, (args.limit_test + b - 1) // b)
        self.val_windows = min(all_windows, val_batches * b)
        self.offsets = np.arange(t + 1, dtype=np.int64)

    def _windows(self, text, starts):
        """inputs [rows, T] and targets [rows, T] (int64) of the windows at `starts`, on the
        run's device (cut on the CPU, then copied)."""
        rows = text[np.asarray(starts, dtype=np.int64)[:, None] + self.offsets]
        rows = torch.from_numpy(rows.astype(np.int64))
        return (rows[:, :-1].contiguous().to(self.device),
                rows[:, 1:].contiguous().to(self.device))

    def train_batch(self, epoch, batch):
        """Batch `batch` of 0-based epoch `epoch`: the windows text_windows.window_starts gives."""
        return self._windows(self.train, window_starts(self.seed, epoch, batch, self.batch_size,
                                                       self.batches_per_epoch, len(self.train),
                                                       self.context))

    def val_batches(self):
        t, b = self.context, self.batch_size
        for first in range(0, self.val_windows, b):
            rows = min(b, self.val_windows - first)
            yield self._windows(self.val, [(first + r) * t for r in range(rows)])

    def describe(self):
        return {"files": len(self.files), "bytes": self.n_bytes, "train_bytes": len(self.train),
                "validation_bytes": len(self.val), "batches_per_epoch": self.batches_per_epoch,
                "train_windows_per_epoch": self.batches_per_epoch * self.batch_size,
                "validation_windows": self.val_windows}


# --- the model -----------------------------------------------------------------------------------
def build_model(args):
    """The GPT of src/nn/gpt.cpp as torch.nn modules named as mixprec's state dict."""

    class MultiHeadAttention(nn.Module):
        def __init__(self, d, heads, dropout):
            super().__init__()
            self.heads, self.dropout = heads, dropout
            self.qkv_proj = nn.Linear(d, 3 * d)  # rows q, k, v: one GEMM, as mixprec's
            self.out_proj = nn.Linear(d, d)

        def forward(self, x):
            b, t, d = x.shape

            def split(y):  # [B, T, d] view -> [B, heads, T, d / heads]
                return y.view(b, t, self.heads, d // self.heads).transpose(1, 2)

            q, k, v = self.qkv_proj(x).split(d, dim=2)
            y = F.scaled_dot_product_attention(
                split(q), split(k), split(v),
                dropout_p=self.dropout if self.training else 0.0, is_causal=True)
            return self.out_proj(y.transpose(1, 2).reshape(b, t, d))

    class TransformerBlock(nn.Module):
        def __init__(self, d, heads, dropout):
            super().__init__()
            self.ln1 = nn.LayerNorm(d, eps=1e-5)
            self.attn = MultiHeadAttention(d, heads, dropout)
            self.drop_attn = nn.Dropout(dropout)
            self.ln2 = nn.LayerNorm(d, eps=1e-5)
            self.fc = nn.Linear(d, 4 * d)
            self.act = nn.GELU(approximate="tanh")
            self.proj = nn.Linear(4 * d, d)
            self.drop_mlp = nn.Dropout(dropout)

        def forward(self, x):
            h = x + self.drop_attn(self.attn(self.ln1(x)))
            return h + self.drop_mlp(self.proj(self.act(self.fc(self.ln2(h)))))

    class GPT(nn.Module):
        def __init__(self, vocab, context, d, heads, layers, dropout):
            super().__init__()
            self.tokens = nn.Embedding(vocab, d)
            self.positions = nn.Embedding(context, d)
            self.drop = nn.Dropout(dropout)
            self.blocks = nn.ModuleList(TransformerBlock(d, heads, dropout) for _ in range(layers))
            self.ln_f = nn.LayerNorm(d, eps=1e-5)
            # mixprec's embeddings start at N(0, 0.02) (Linear layers: torch's default here; with
            # --init every tensor is overwritten anyway)
            nn.init.normal_(self.tokens.weight, std=0.02)
            nn.init.normal_(self.positions.weight, std=0.02)
            self.register_buffer("pos", torch.arange(context), persistent=False)

        def forward(self, ids):
            t = ids.shape[1]
            h = self.drop(self.tokens(ids) + self.positions(self.pos[:t]))
            for block in self.blocks:
                h = block(h)
            return F.linear(self.ln_f(h), self.tokens.weight)  # tied head, no bias

    if args.width % args.heads:
        raise Failure("--heads %d does not divide --width %d" % (args.heads, args.width))
    return GPT(args.vocab, args.context, args.width, args.heads, args.layers, args.dropout)


SAFETENSORS_DTYPES = {"F32": ("<f4", None), "F16": ("<f2", None), "F64": ("<f8", None),
                      "BF16": ("<u2", "bfloat16")}


def read_safetensors(path):
    """{name: f32 tensor} of a safetensors file (8-byte little-endian header length, JSON header,
    raw little-endian data), parsed here so the safetensors package is not needed."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Failure("--init %s: %s" % (path, e.strerror))
    if len(data) < 8:
        raise Failure("--init %s: too short for a safetensors file" % path)
    (hlen,) = struct.unpack("<Q", data[:8])
    if 8 + hlen > len(data):
        raise Failure("--init %s: header length %d runs past the file (%d bytes)"
                      % (path, hlen, len(data)))
    try:
        header = json.loads(data[8:8 + hlen])
    except ValueError as e:
        raise Failure("--init %s: the header is not JSON (%s)" % (path, e))
    body = memoryview(data)[8 + hlen:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, (lo, hi) = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in SAFETENSORS_DTYPES:
            raise Failure("--init %s: tensor %s has dtype %s; expected F32 (or F16/BF16/F64)"
                          % (path, name, dtype))
        np_dtype, view = SAFETENSORS_DTYPES[dtype]
        count = math.prod(shape)
        if not 0 <= lo <= hi <= len(body) or hi - lo != count * np.dtype(np_dtype).itemsize:
            raise Failure("--init %s: tensor %s: offsets [%d, %d) do not hold %s %s"
                          % (path, name, lo, hi, dtype, shape))
        arr = np.frombuffer(body[lo:hi], dtype=np_dtype).reshape(shape).copy()
        t = torch.from_numpy(arr)
        if view:
            t = t.view(getattr(torch, view))
        out[name] = t.float()
    return out


def fuse_older_qkv(tensors):
    """An older mixprec file's "<p>q_proj.<x>", "<p>k_proj.<x>", "<p>v_proj.<x>" as the one
    "<p>qkv_proj.<x>" (rows concatenated in that order), as MultiHeadAttention loads them."""
    out = dict(tensors)
    for name in sorted(tensors):
        head, sep, rest = name.partition("q_proj.")
        if not sep or (head and not head.endswith(".")):
            continue
        parts = [head + p + "_proj." + rest for p in "qkv"]
        if all(p in tensors for p in parts) and head + "qkv_proj." + rest not in tensors:
            out[head + "qkv_proj." + rest] = torch.cat([tensors[p] for p in parts], 0)
            for p in parts:
                del out[p]
    return out


def load_init(model, path):
    """Copies every tensor of the file into the model by name; Failure listing every missing,
    extra or mis-shaped tensor."""
    tensors = fuse_older_qkv(read_safetensors(path))
    own = model.state_dict()
    missing = sorted(set(own) - set(tensors))
    extra = sorted(set(tensors) - set(own))
    shapes = ["%s: file %s, model %s" % (k, list(tensors[k].shape), list(own[k].shape))
              for k in sorted(set(own) & set(tensors)) if tensors[k].shape != own[k].shape]
    if missing or extra or shapes:
        msg = ["--init %s does not fit this model (context %d, layers %d, heads %d, width %d):"
               % (path, ARGS.context, ARGS.layers, ARGS.heads, ARGS.width)]
        def some(items, sep):  # the first 6, and how many more
            more = " ... and %d more" % (len(items) - 6) if len(items) > 6 else ""
            return sep.join(items[:6]) + more

        if missing:
            msg.append("  missing from the file (%d): %s" % (len(missing), some(missing, ", ")))
        if extra:
            msg.append("  not in the model (%d): %s" % (len(extra), some(extra, ", ")))
        if shapes:
            msg.append("  shapes differ (%d): %s" % (len(shapes), some(shapes, "; ")))
        msg.append("  pass the --context/--layers/--heads/--width of the mixprec run that wrote it")
        raise Failure("\n".join(msg))
    with torch.no_grad():
        for k, v in own.items():
            v.copy_(tensors[k])
    return len(tensors)


# --- the step ------------------------------------------------------------------------------------
def param_groups(model, weight_decay, no_decay):
    """optim::weight_decay_groups: "bias" = parameters named bias, "norm" = every parameter of a
    *Norm* module, "embedding" = every parameter of an *Embedding* module (the tied head's weight
    is the token table's); one group (all decayed) when nothing is excluded."""
    allowed = {"bias", "norm", "embedding"}
    exclude = set(x for x in no_decay.split(",") if x) if no_decay else set()
    if exclude - allowed:
        raise Failure("unknown --no-decay entries %s; give a comma-separated list of bias, norm, "
                      "embedding" % sorted(exclude - allowed))
    if not exclude:
        return [{"params": list(model.parameters()), "weight_decay": weight_decay}]
    decay, keep = [], []
    for module in model.modules():
        whole = (("norm" in exclude and "Norm" in type(module).__name__) or
                 ("embedding" in exclude and "Embedding" in type(module).__name__))
        for name, p in module.named_parameters(recurse=False):
            (keep if whole or ("bias" in exclude and name == "bias") else decay).append(p)
    groups = []
    if decay:
        groups.append({"params": decay, "weight_decay": weight_decay})
    if keep:
        groups.append({"params": keep, "weight_decay": 0.0})
    return groups


class Step:
    """TrainStep: autocast forward + loss, scaled backward, unscale, norm (+ clip), optimizer step
    through the scaler, scaler update, schedule, zero_grad."""

    def __init__(self, model, args, schedule_steps):
        self.model, self.args = model, args
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.base_lr = f32(args.lr)
        wd = f32(args.weight_decay)
        groups = param_groups(model, wd, args.no_decay)
        cls = torch.optim.AdamW if args.optimizer == "adamw" else torch.optim.Adam
        self.opt = cls(groups, lr=self.base_lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=wd)
        self.lower = getattr(torch, LOWER[args.precision]) if args.precision in LOWER else None
        self.device_type = args.torch_device.type  # autocast's and the scaler's: cpu or cuda
        self.scaler = None
        if args.precision == "fp16":
            if not hasattr(torch, "amp") or not hasattr(torch.amp, "GradScaler"):
                raise Failure("fp16 needs torch.amp.GradScaler (torch >= 2.3); this is torch %s"
                              % torch.__version__)
            self.scaler = torch.amp.GradScaler(self.device_type, init_scale=65536.0,
                                               growth_factor=2.0, backoff_factor=0.5,
                                               growth_interval=args.scaler_growth_interval)
        self.schedule_steps = schedule_steps
        self.applied = 0  # optimizer updates applied: the schedule's t
        self.skipped = 0
        self.checked = False

    def lr_at(self, t):
        if self.args.scheduler != "cosine":
            return self.base_lr
        return f32(self.base_lr * (1.0 + math.cos(math.pi * t / self.schedule_steps)) / 2.0)

    def forward_loss(self, x, y):
        """The f32 loss: mean cross-entropy over every position, on the (autocast) logits."""
        if self.lower is None:
            logits = self.model(x)
        else:
            with torch.autocast(self.device_type, dtype=self.lower):
                logits = self.model(x)
            if not self.checked and logits.dtype != self.lower:
                raise Failure("torch %s did not autocast the model to %s on %s (its logits "
                              "are %s), so its numbers would be fp32's"
                              % (torch.__version__, self.lower, self.device_type, logits.dtype))
            self.checked = True
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1))

    def backward(self, x, y, accum=1):
        """One micro-batch: returns the loss value (before the 1/accum factor)."""
        loss = self.forward_loss(x, y)
        value = loss.item()
        if accum > 1:
            loss = loss * (1.0 / accum)
        (self.scaler.scale(loss) if self.scaler else loss).backward()
        return value

    def unscale_and_clip(self):
        """The global norm of the unscaled gradients (before clipping)."""
        if self.scaler:
            self.scaler.unscale_(self.opt)
        if self.args.clip > 0:
            return float(nn.utils.clip_grad_norm_(self.params, f32(self.args.clip)))
        return float(common.total_grad_norm(self.params))

    def apply(self):
        """Optimizer step (skipped on Inf/NaN with fp16), scaler update, schedule, zero_grad;
        returns whether the update was applied."""
        applied = True
        if self.scaler:
            before = self.scaler.get_scale()
            self.scaler.step(self.opt)
            self.scaler.update()
            applied = self.scaler.get_scale() >= before  # a backoff means the step was skipped
        else:
            self.opt.step()
        if applied:
            self.applied += 1
            lr = self.lr_at(self.applied)
            for g in self.opt.param_groups:
                g["lr"] = lr
        else:
            self.skipped += 1
        self.opt.zero_grad(set_to_none=True)
        return applied

    def __call__(self, x, y):
        """One whole step on one batch (--time)."""
        value = self.backward(x, y)
        self.unscale_and_clip()
        self.apply()
        return value

    def loss_scale(self):
        return self.scaler.get_scale() if self.scaler else 1.0


def evaluate(model, step, data):
    """Trainer::evaluate + LanguageModelEvaluation: eval mode, no grad, the precision's autocast;
    mean loss over every predicted byte (batch means times their tokens, summed in double)."""
    model.eval()
    loss_sum, tokens = 0.0, 0
    with torch.no_grad():
        for x, y in data.val_batches():
            loss = step.forward_loss(x, y).item()
            loss_sum += loss * y.numel()
            tokens += y.numel()
    model.train()
    mean = loss_sum / tokens if tokens else 0.0
    return {"val_loss": mean, "perplexity": math.exp(mean), "bits_per_byte": mean / math.log(2)}


# --- modes ---------------------------------------------------------------------------------------
def environment(args):
    env = {"framework": "pytorch", "version": torch.__version__,
           "threads": torch.get_num_threads(), "blas": BLAS, "torch_build": common.torch_build(),
           "cpu_flags": common.cpu_flags(), "load_average": list(os.getloadavg()),
           "max_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    env.update(common.device_info(args.torch_device, args.matmul_precision))
    return env


def model_config(args):
    return {"context": args.context, "layers": args.layers, "heads": args.heads,
            "width": args.width, "dropout": args.dropout, "vocab": args.vocab}


def step_config(args):
    return {"precision": args.precision, "batch_size": args.batch_size, "lr": args.lr,
            "optimizer": args.optimizer, "weight_decay": args.weight_decay,
            "no_decay": args.no_decay, "clip": args.clip, "accum": args.accum,
            "scheduler": args.scheduler, "seed": args.seed}


def make_model(args):
    model = build_model(args)
    loaded = load_init(model, args.init) if args.init else 0
    model.to(args.torch_device)  # built and loaded on the CPU: the same weights on every device
    model.train()
    return model, loaded


def run_train(args):
    data = TextData(args)
    model, _ = make_model(args)
    steps_per_epoch = (data.batches_per_epoch + args.accum - 1) // args.accum
    schedule = max(1, steps_per_epoch * args.epochs)
    if args.max_steps > 0:
        schedule = min(schedule, args.max_steps)
    step = Step(model, args, schedule)
    log_every = args.log_every or max(1, (args.max_steps if args.max_steps > 0
                                          else steps_per_epoch * args.epochs) // 20)
    curve, window, losses_all, step_ms = [], [], [], []
    epochs, taken, stop = [], 0, False
    first_loss = first_norm = None
    total_seconds = total_tokens = 0
    sync = common.device_sync(args.torch_device)  # a no-op on the CPU
    for epoch in range(1, args.epochs + 1):
        loss_sum, micro, norms, samples = 0.0, 0, [], 0
        skipped_before = step.skipped
        sync()
        t0 = time.perf_counter()
        batch = 0
        while batch < data.batches_per_epoch and not stop:
            sync()
            s0 = time.perf_counter()
            in_step, step_loss = 0, 0.0
            while batch < data.batches_per_epoch and in_step < args.accum:
                x, y = data.train_batch(epoch - 1, batch)
                value = step.backward(x, y, args.accum)
                if not math.isfinite(value) and step.scaler is None:
                    raise Failure("the loss became %s at epoch %d, batch %d (%s): training diverged"
                                  % (value, epoch, batch, args.precision))
                loss_sum += value
                step_loss += value
                samples += x.shape[0]
                micro += 1
                in_step += 1
                batch += 1
            norm = step.unscale_and_clip()
            if math.isfinite(norm):
                norms.append(norm)
            step.apply()
            sync()
            step_ms.append((time.perf_counter() - s0) * 1e3)
            taken += 1
            mean = step_loss / in_step
            losses_all.append(mean)
            window.append(mean)
            if first_loss is None:
                first_loss, first_norm = mean, norm
            if taken % log_every == 0:
                curve.append([taken, sum(window) / len(window)])
                window = []
                if not args.json and not args.quiet:
                    print("step %6d  train loss %.4f  lr %.3g" % (taken, curve[-1][1],
                                                                  step.opt.param_groups[0]["lr"]),
                          flush=True)
            if args.max_steps > 0 and taken >= args.max_steps:
                stop = True
        sync()
        seconds = time.perf_counter() - t0
        total_seconds += seconds
        total_tokens += samples * args.context
        t_eval = time.perf_counter()
        ev = evaluate(model, step, data)
        line = {"epoch": epoch, "complete": batch >= data.batches_per_epoch, "epoch_batches": micro,
                "train_samples": samples, "optimizer_steps": step.applied,
                "train_loss": loss_sum / micro if micro else 0.0,
                "samples_per_second": samples / seconds if seconds > 0 else None,
                "train_seconds": seconds, "eval_seconds": time.perf_counter() - t_eval,
                "skipped_steps": step.skipped - skipped_before, "loss_scale": step.loss_scale(),
                "grad_norm_mean": sum(norms) / len(norms) if norms else 0.0,
                "grad_norm_max": max(norms) if norms else 0.0,
                "lr": step.opt.param_groups[0]["lr"]}
        line.update(ev)
        epochs.append(line)
        if not args.json and not args.quiet:
            print("epoch %d%s: train loss %.4f  val loss %.4f  %.4f bits/byte  %.0f tokens/s"
                  % (epoch, "" if line["complete"] else " (stopped at --max-steps)",
                     line["train_loss"], ev["val_loss"], ev["bits_per_byte"],
                     samples * args.context / seconds), flush=True)
        if stop:
            break
    if window:
        curve.append([taken, sum(window) / len(window)])
    last = epochs[-1]
    result = {"mode": "train", "precision": args.precision, "init": args.init,
              "model": model_config(args), "step": step_config(args), "data": data.describe(),
              "epochs_run": len(epochs), "steps": taken, "skipped_steps": step.skipped,
              "schedule_steps": schedule, "first_loss": first_loss, "first_grad_norm": first_norm,
              "val_loss": last["val_loss"], "perplexity": last["perplexity"],
              "bits_per_byte": last["bits_per_byte"], "train_loss": last["train_loss"],
              "train_loss_curve": curve, "log_every": log_every,
              "train_tokens": total_tokens, "train_seconds": total_seconds,
              "tokens_per_second": total_tokens / total_seconds if total_seconds > 0 else None,
              "step_ms": {"median": statistics.median(step_ms), "min": min(step_ms),
                          "max": max(step_ms)} if step_ms else None,
              "epochs": epochs}
    result.update(environment(args))
    return result


def time_model(args, compiled):
    """(timings, compile fields) of --time's steps on a fresh model: eager, or (compiled=True)
    through torch.compile after one untimed compiling step."""
    device = args.torch_device
    common.reset_device_memory(device)
    torch.manual_seed(args.seed)
    model, loaded = make_model(args)
    extra = {}
    if compiled:
        model = torch.compile(model, backend="inductor")  # default mode
    step = Step(model, args, 1)
    g = torch.Generator().manual_seed(args.seed + 1)
    x = torch.randint(0, args.vocab, (args.batch_size, args.context), generator=g).to(device)
    y = torch.randint(0, args.vocab, (args.batch_size, args.context), generator=g).to(device)
    sync = common.device_sync(device) if device.type == "cuda" else None
    if compiled:  # the compiling step: not a warm-up step, so it cannot shorten the run
        extra["compile_seconds"] = common.time_one(step, x, y, sync)[0] / 1e3
    timed = common.time_steps(step, x, y, args.warmup, args.steps, args, sync=sync)
    return timed, extra


def run_time(args):
    timed, compile_fields = common.compiled_or_eager(
        lambda compiled: time_model(args, compiled), args.compile, "peer_gpt.py", keep=(Failure,))
    times, cpu, warmup, steps, shortened = timed
    median = statistics.median(times)
    result = {"mode": "time", "precision": args.precision, "model": model_config(args),
              "step": step_config(args), "init": args.init, "batch_size": args.batch_size,
              "steps": steps, "warmup": warmup, "shortened": shortened,
              "step_ms": {"median": median, "min": min(times), "max": max(times)},
              "step_cpu_ms": {"median": statistics.median(cpu)},
              "tokens_per_second": args.batch_size * args.context / (median / 1e3),
              "grad_norm": common.grad_norm_method()}
    result.update(compile_fields)
    result.update(environment(args))
    return result


def run_check(args):
    data = TextData(args)
    model, loaded = make_model(args)
    step = Step(model, args, 1)
    x, y = data.train_batch(0, 0)
    loss = step.backward(x, y)
    norm = step.unscale_and_clip()
    result = {"mode": "check-forward", "precision": args.precision, "init": args.init,
              "tensors_loaded": loaded, "model": model_config(args), "batch_size": args.batch_size,
              "seed": args.seed, "data": data.describe(), "loss": loss, "grad_norm": norm}
    if args.eval:
        step.opt.zero_grad(set_to_none=True)
        result.update(evaluate(model, step, data))
    result.update(environment(args))
    return result


class Parser(argparse.ArgumentParser):
    def error(self, message):
        """Bad usage: one line on stderr and exit status 2."""
        self.exit(2, "%s: %s (see --help)\n" % (self.prog, message))


def parse(argv):
    p = Parser(prog="peer_gpt.py", description=__doc__.split("\n\n")[0],
               epilog=__doc__.split("\n\n", 1)[1],
               formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--train", action="store_true", help="train and evaluate (see below)")
    mode.add_argument("--time", action="store_true", help="time steps on a fixed random batch")
    mode.add_argument("--check-forward", action="store_true",
                      help="loss and gradient norm of the first training batch from --init")
    p.add_argument("--init", help="safetensors weights from `mixprec train --save-initial-weights`")
    m = p.add_argument_group("model (0 = gpt-mini's default)")
    for k in ("context", "layers", "heads", "width"):
        m.add_argument("--" + k, type=int, default=0, help="default %d" % GPT_MINI[k])
    m.add_argument("--vocab", type=int, default=0,
                   help="--time only: vocabulary size (default %d, the bytes; mixprec's GPTs are "
                        "all %d)" % (VOCAB, VOCAB))
    m.add_argument("--dropout", type=float, default=0.0)
    d = p.add_argument_group("data")
    d.add_argument("--data", default="", help="text:PATH[,PATH...] (default %s)" % FORTUNES)
    d.add_argument("--val-fraction", type=float, default=0.1)
    d.add_argument("--limit-train", type=int, default=-1,
                   help="training windows per epoch, rounded up to whole batches (-1 = the text's)")
    d.add_argument("--limit-test", type=int, default=-1,
                   help="validation windows, rounded up to whole batches (-1 = all)")
    s = p.add_argument_group("step (mixprec train's flags and defaults)")
    s.add_argument("--precision", choices=PRECISIONS, default="fp32")
    s.add_argument("--batch-size", type=int, default=0,
                   help="windows per batch (default 128 for --train/--check-forward as mixprec "
                        "train, 16 for --time as mixprec bench)")
    s.add_argument("--lr", type=float, default=1e-3)
    s.add_argument("--optimizer", choices=("adam", "adamw"), default="adam")
    s.add_argument("--weight-decay", type=float, default=0.0)
    s.add_argument("--no-decay", default="", help="comma-separated: bias, norm, embedding")
    s.add_argument("--clip", type=float, default=0.0, help="max gradient norm; 0 = off")
    s.add_argument("--accum", type=int, default=1)
    s.add_argument("--scheduler", choices=("none", "cosine"), default=None,
                   help="default cosine for --train (as mixprec train), none for --time")
    s.add_argument("--scaler-growth-interval", type=int, default=2000)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--epochs", type=int, default=1)
    s.add_argument("--max-steps", type=int, default=-1, help="-1 = run all --epochs")
    r = p.add_argument_group("run")
    r.add_argument("--threads", type=int, default=2,
                   help="torch.set_num_threads: the CPU's threads (default 2)")
    r.add_argument("--device", type=common.device_arg, default="cpu",
                   help="cpu (default), cuda or cuda:N (an NVIDIA GPU; see Devices below)")
    r.add_argument("--matmul-precision", choices=common.MATMUL_PRECISIONS, default="highest",
                   help="f32 GEMMs: highest (true f32; default), high or medium (TF32 on a GPU)")
    r.add_argument("--compile", action="store_true",
                   help="--time: time torch.compile(model) (inductor); a failure falls back to "
                        "eager and is reported as compile_error")
    r.add_argument("--log-every", type=int, default=0,
                   help="--train: a train-loss point every N steps (default: 20 points)")
    r.add_argument("--steps", type=int, default=10, help="--time: timed steps (default 10)")
    r.add_argument("--warmup", type=int, default=3, help="--time: warm-up steps (default 3)")
    r.add_argument("--slow-step-s", type=float, default=2.0,
                   help="--time: a first step slower than this may shorten the run (default 2)")
    r.add_argument("--budget-s", type=float, default=120.0,
                   help="--time: seconds a slow run is shortened to fit (default 120)")
    r.add_argument("--eval", action="store_true", help="--check-forward: also the validation loss")
    r.add_argument("--quiet", action="store_true", help="--train: no progress lines")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args(argv)
    for k in ("context", "layers", "heads", "width"):
        if getattr(args, k) < 0:
            p.error("--%s must be >= 1 (0 = default)" % k)
        setattr(args, k, getattr(args, k) or GPT_MINI[k])
    if args.vocab < 0:
        p.error("--vocab must be >= 1 (0 = %d)" % VOCAB)
    args.vocab = args.vocab or VOCAB
    if args.vocab != VOCAB and not args.time:
        p.error("--vocab is for --time only: the text is bytes, a vocabulary of %d" % VOCAB)
    if args.compile and not args.time:
        p.error("--compile is for --time only")
    if args.batch_size < 0:
        p.error("--batch-size must be >= 1")
    args.batch_size = args.batch_size or (16 if args.time else 128)
    if args.scheduler is None:
        args.scheduler = "none" if args.time else "cosine"
    if (args.train or args.check_forward) and not args.init:
        p.error("--%s needs --init FILE (mixprec train --save-initial-weights)"
                % ("train" if args.train else "check-forward"))
    if not 0 < args.val_fraction < 1:
        p.error("--val-fraction must be in (0, 1)")
    if not 0 <= args.dropout < 1:
        p.error("--dropout must be in [0, 1)")
    if args.lr <= 0 or args.weight_decay < 0 or args.clip < 0:
        p.error("--lr must be > 0, --weight-decay and --clip >= 0")
    if args.accum < 1 or args.epochs < 1 or args.threads < 1 or args.steps < 1 or args.warmup < 0:
        p.error("--accum, --epochs, --threads, --steps must be >= 1 and --warmup >= 0")
    if args.max_steps == 0 or args.max_steps < -1 or args.limit_train == 0 or args.limit_test == 0:
        p.error("--max-steps, --limit-train and --limit-test must be >= 1 (or -1)")
    if args.scaler_growth_interval < 1 or args.log_every < 0:
        p.error("--scaler-growth-interval must be >= 1 and --log-every >= 0")
    return args


def print_text(r):
    env = "pytorch %s, threads %d, blas %s, cpu flags: %s" % (
        r["version"], r["threads"], r["blas"], " ".join(r["cpu_flags"]))
    if "device_name" in r:
        env += "\ndevice %s: %s (capability %s), cuda %s, cudnn %s, matmul precision %s (tf32: " \
               "matmul %s, cudnn %s), peak device memory %.0f MiB" % (
                   r["device"], r["device_name"], ".".join(map(str, r["device_capability"])),
                   r["cuda_version"], r["cudnn_version"], r["matmul_precision"],
                   r["tf32"]["cuda_matmul"], r["tf32"]["cudnn"], r["peak_device_bytes"] / 2**20)
    elif r["matmul_precision"] != "highest":
        env += ", matmul precision %s" % r["matmul_precision"]
    if r["mode"] == "check-forward":
        print("check-forward %s, batch %d, seed %d: loss %.8f, grad norm %.8f%s"
              % (r["precision"], r["batch_size"], r["seed"], r["loss"], r["grad_norm"],
                 ", val loss %.8f" % r["val_loss"] if "val_loss" in r else ""))
    elif r["mode"] == "time":
        ms = r["step_ms"]
        print("time %s%s, batch %d x %d tokens: median %.2f ms (min %.2f, max %.2f), %.0f tokens/s"
              % (r["precision"], ", torch.compile" if r["compiled"] else "", r["batch_size"],
                 r["model"]["context"], ms["median"], ms["min"], ms["max"],
                 r["tokens_per_second"]))
        if r["compiled"]:
            print("compiled in %.1f s (the untimed first step)" % r["compile_seconds"])
        if "compile_error" in r:
            print("note: torch.compile failed, these are the eager model's times: %s"
                  % r["compile_error"])
        if r["shortened"]:
            print("note: shortened: %s" % r["shortened"])
    else:
        print("train %s: %d steps (%d skipped), val loss %.4f, %.4f bits/byte, train loss %.4f, "
              "%.0f tokens/s" % (r["precision"], r["steps"], r["skipped_steps"], r["val_loss"],
                                 r["bits_per_byte"], r["train_loss"], r["tokens_per_second"]))
    print(env)


def main(argv=None):
    global torch, nn, F, np, BLAS, ARGS
    args = parse(sys.argv[1:] if argv is None else argv)
    ARGS = args
    common.import_torch(args.threads)
    import numpy as np_module
    import torch as torch_module
    import torch.nn as nn_module
    import torch.nn.functional as functional
    torch, nn, F, np = torch_module, nn_module, functional, np_module
    args.torch_device = common.setup_device(args.device, args.matmul_precision, "peer_gpt.py")
    common.reset_device_memory(args.torch_device)  # --time resets again per timed model
    BLAS = common.blas_library()
    if common.reference_blas(BLAS):
        print("peer_gpt.py: WARNING: torch's fp32 GEMMs use the reference BLAS %s (slow, not a "
              "fair peer); use torch from PyPI (bench/setup-peer.sh)" % BLAS, file=sys.stderr)
    try:
        if args.train:
            result = run_train(args)
        elif args.time:
            result = run_time(args)
        else:
            result = run_check(args)
    except Failure as e:
        print("peer_gpt.py: %s" % e, file=sys.stderr)
        return 1
    if args.json:
        json.dump(result, sys.stdout, indent=2)
        print()
    else:
        print_text(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
