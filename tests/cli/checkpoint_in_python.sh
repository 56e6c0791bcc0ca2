#!/usr/bin/env bash
# The model.safetensors of a checkpoint loads in the real `safetensors` Python package (numpy
# backend) with the documented module-path names, shapes and dtype (FP32 master weights).
# Skipped (exit 77) when the package is missing, unless MIXPREC_REQUIRE_PYTHON_TESTS=1 (CI):
# see require_python_packages in common.sh.
source "$(dirname "$0")/common.sh"
require_python_packages "safetensors.numpy, numpy" "safetensors numpy"
"$MIXPREC" train --model cnn --precision pure-bf16 --epochs 1 --limit-train 256 --limit-test 100 \
  --threads 1 --no-progress --checkpoint-dir "$WORK/ckpt" > /dev/null || { echo "FAIL: training"; exit 1; }
"$PY" - "$WORK/ckpt/epoch-0001/model.safetensors" <<'PYEOF' || failures=$((failures + 1))
import sys, numpy as np
from safetensors.numpy import load_file
from safetensors import safe_open
t = load_file(sys.argv[1])
expected = {
    "features.0.weight": (32, 1, 3, 3), "features.1.weight": (32,), "features.1.bias": (32,),
    "features.1.running_mean": (32,), "features.1.running_var": (32,),
    "features.4.weight": (64, 32, 3, 3), "classifier.1.weight": (128, 3136),
    "classifier.1.bias": (128,), "classifier.3.weight": (10, 128), "classifier.3.bias": (10,),
}
for name, shape in expected.items():
    assert name in t, f"missing {name}; have {sorted(t)}"
    assert t[name].shape == shape, (name, t[name].shape, shape)
    assert t[name].dtype == np.float32, (name, t[name].dtype)
    assert np.isfinite(t[name]).all(), name
with safe_open(sys.argv[1], framework="np") as f:
    meta = f.metadata()
assert meta["mixprec.model"] == "cnn" and meta["mixprec.precision"] == "pure-bf16", meta
# pure-bf16 keeps the FP32 master: the saved weights are not all representable in bf16.
w = t["classifier.1.weight"].view(np.uint32)
assert (w & 0xFFFF).any(), "weights look like bf16 copies, not FP32 masters"
print("ok   checkpoint loads in safetensors", len(t), "tensors")
PYEOF
finish
