#!/usr/bin/env python3
"""Reference for mixprec's random text windows (data::TextWindows, include/mixprec/data/text_corpus.h).

A PyTorch peer that copies window_starts() trains on exactly the batches mixprec trains on:
row r of batch b of epoch e is the window text[s : s + context] with targets
text[s + 1 : s + context + 1], s = window_starts(...)[r]. Plain Python, no packages.

Usage: text_windows.py SEED EPOCH BATCH BATCH_SIZE BATCHES_PER_EPOCH N CONTEXT [SEED EPOCH ...]
prints each batch's BATCH_SIZE window starts, one per line, batch after batch (used by
tests/data/test_text_corpus.cpp, which asks for several batches in one run).
"""
import sys

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def splitmix64(x):
    """The splitmix64 finaliser on a 64-bit word (mixprec::splitmix64 in core/random.h)."""
    z = (x + GOLDEN) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def window_starts(seed, epoch, batch, batch_size, batches_per_epoch, n, context):
    """Start offsets of the batch_size windows of batch `batch` of epoch `epoch` (n bytes of text)."""
    assert n > context >= 1, "a window needs context + 1 bytes"
    starts = []
    for row in range(batch_size):
        c = ((epoch * batches_per_epoch + batch) * batch_size + row) & MASK
        starts.append(splitmix64((seed * GOLDEN + c) & MASK) % (n - context))
    return starts


if __name__ == "__main__":
    args = [int(a) for a in sys.argv[1:]]
    if not args or len(args) % 7 != 0:
        sys.stderr.write(__doc__)
        sys.exit(2)
    for i in range(0, len(args), 7):
        for s in window_starts(*args[i:i + 7]):
            print(s)
