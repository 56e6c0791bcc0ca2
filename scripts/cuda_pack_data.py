#!/usr/bin/env python3
"""Small data sets for scripts/check-cuda.sh, whose GPU machine has no Debian packages: the first
N training and M test images of Fashion-MNIST (MNIST idx format, gzip) and a few fortune files
(text for gpt-mini).

Usage: cuda_pack_data.py OUT_DIR [--train N] [--test M]
Writes OUT_DIR/fmnist/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz and OUT_DIR/text/*.
"""
import argparse
import gzip
import os
import shutil
import struct
import sys

FMNIST = "/usr/share/datasets/fashion-mnist"  # Debian package dataset-fashion-mnist
FORTUNES = "/usr/share/games/fortunes"          # Debian package fortunes
TEXT_FILES = ("computers", "science", "wisdom", "literature", "people")


def cut_idx(src, dst, count):
    """Copies the first `count` items of an idx file (header rewritten with the new count)."""
    with gzip.open(src, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        ndim = magic & 0xFF
        dims = list(struct.unpack(">" + "I" * ndim, f.read(4 * ndim)))
        if count > dims[0]:
            sys.exit("cuda_pack_data: %s has %d items, fewer than %d" % (src, dims[0], count))
        item = 1
        for d in dims[1:]:
            item *= d
        body = f.read(count * item)
    dims[0] = count
    with gzip.open(dst, "wb") as g:
        g.write(struct.pack(">I", magic) + struct.pack(">" + "I" * ndim, *dims) + body)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out")
    p.add_argument("--train", type=int, default=7000)
    p.add_argument("--test", type=int, default=1000)
    a = p.parse_args()
    fm = os.path.join(a.out, "fmnist")
    os.makedirs(fm, exist_ok=True)
    for split, n in (("train", a.train), ("t10k", a.test)):
        for part in ("images-idx3", "labels-idx1"):
            name = "%s-%s-ubyte.gz" % (split, part)
            cut_idx(os.path.join(FMNIST, name), os.path.join(fm, name), n)
    text = os.path.join(a.out, "text")
    os.makedirs(text, exist_ok=True)
    for name in TEXT_FILES:
        shutil.copyfile(os.path.join(FORTUNES, name), os.path.join(text, name))


if __name__ == "__main__":
    main()
