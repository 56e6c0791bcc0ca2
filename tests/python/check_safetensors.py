#!/usr/bin/env python3
"""Checks a safetensors file with the real `safetensors` package against an expectation.

Usage: check_safetensors.py FILE SPEC.json
       check_safetensors.py --write FILE   (writes the sample below with save_file, for the
                                            reverse direction: mixprec reading the package's files)

SPEC.json:
  {"tensors": {"<name>": {"dtype": "F32"|"F16"|"BF16", "shape": [...],
                          "bits": [<element bit pattern as an unsigned int>, ...]}, ...},
   "metadata": {"<key>": "<value>", ...}}

The names must match exactly (no missing, no extra tensors), as must dtypes, shapes, the bits
of every element (so NaN payloads and signed zeros are compared too) and the metadata.

numpy has no bfloat16 dtype, so safetensors.numpy.load_file raises KeyError('BF16') on any file
holding a BF16 tensor. Such files are read with safetensors.deserialize (the package's Rust
parser and validator, which load_file itself uses), and BF16 values are taken as uint16 bit
patterns; F32/F16 tensors are then compared through numpy as usual. Files without BF16 are also
loaded with load_file. Exit status: 0 if everything matches, 1 on a mismatch, 2 on bad usage.
"""
import json
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file

BITS = {"F32": np.uint32, "F16": np.uint16, "BF16": np.uint16}


def write_sample(path):
    """F32 [2, 3] = 0..5, F16 [4] = [1, -2, inf, 0.5], F32 0-d = 7, metadata {"src": "python"}."""
    from safetensors.numpy import save_file
    save_file({"b_f32": np.arange(6, dtype=np.float32).reshape(2, 3),
               "a_f16": np.array([1, -2, np.inf, 0.5], dtype=np.float16),
               "c_scalar": np.array(7, dtype=np.float32)}, path, metadata={"src": "python"})
    return 0


def main(argv):
    if len(argv) == 3 and argv[1] == "--write":
        return write_sample(argv[2])
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    path, spec_path = argv[1], argv[2]
    with open(spec_path, encoding="utf-8") as f:
        spec = json.load(f)
    with open(path, "rb") as f:
        data = f.read()
    errors = []

    # The package's own parser: raises on any header or offset problem.
    views = {name: view for name, view in safetensors.deserialize(data)}
    expected = spec.get("tensors", {})
    if sorted(views) != sorted(expected):
        errors.append(f"names: file has {sorted(views)}, expected {sorted(expected)}")
    for name in sorted(set(views) & set(expected)):
        view, want = views[name], expected[name]
        if view["dtype"] != want["dtype"]:
            errors.append(f"{name}: dtype {view['dtype']}, expected {want['dtype']}")
            continue
        if list(view["shape"]) != list(want["shape"]):
            errors.append(f"{name}: shape {view['shape']}, expected {want['shape']}")
            continue
        bits = np.frombuffer(bytes(view["data"]), dtype=np.dtype(BITS[want["dtype"]]).newbyteorder("<"))
        if bits.tolist() != list(want["bits"]):
            errors.append(f"{name}: element bits {bits.tolist()[:16]}, expected {list(want['bits'])[:16]}")

    has_bf16 = any(v["dtype"] == "BF16" for v in views.values())
    if not has_bf16:
        arrays = load_file(path)
        for name, arr in arrays.items():
            want = expected.get(name)
            if want is None:
                continue
            if list(arr.shape) != list(want["shape"]):
                errors.append(f"load_file {name}: shape {list(arr.shape)}, expected {want['shape']}")
                continue
            got = np.ascontiguousarray(arr).view(BITS[want["dtype"]]).reshape(-1).tolist()
            if got != list(want["bits"]):
                errors.append(f"load_file {name}: element bits differ")

    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata() or {}
    if metadata != spec.get("metadata", {}):
        errors.append(f"metadata {metadata}, expected {spec.get('metadata', {})}")

    for e in errors:
        print(f"check_safetensors: {path}: {e}", file=sys.stderr)
    if not errors:
        print(f"check_safetensors: {path}: OK ({len(views)} tensors"
              f"{', BF16 via deserialize' if has_bf16 else ', load_file too'})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
