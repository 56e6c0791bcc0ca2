#!/usr/bin/env python3
"""Bit-for-bit comparison of one tests/cli/devsim.sh case run under two backends.

Usage: devsim_compare.py CASE DIR_A DIR_B NAME_A NAME_B [IGNORE_KEYS]

DIR_A and DIR_B are the case's working directories (the same commands, run under backend NAME_A
and NAME_B). Every file in them is compared, by kind:
  *.safetensors              the header (dtypes, shapes, offsets, metadata) and every tensor's
                             bytes; a difference names the tensor, how many elements differ and
                             the first one (index and both values)
  *.jsonl                    line by line, as JSON (training logs)
  *.json                     as JSON (state.json, policies, `--json` outputs)
  *.raw, *.csv, *.txt        byte for byte (generated text, predictions)
  *.err, *.skip, MANIFEST.json, .mixprec-lock   not compared (stderr, timings, checksums of files
                             that hold times, the lock's pid)
In JSON, numbers are compared bit for bit (as the doubles they denote: -0.0 differs from 0.0,
NaN equals NaN, 1 differs from 1.0), strings exactly, and keys that measure time, speed,
memory or the host are left out (IGNORED below, plus IGNORE_KEYS: comma-separated key names).
Both directories must hold the same files. Prints one 'ok' line, or 'FAIL' lines naming the case,
the file and the field or tensor; exits 1 on any difference.
"""
import json
import math
import os
import re
import struct
import sys

# Keys whose values are measurements of this run (time, speed, memory, allocations, host<->device
# transfers: the reference has no device) or describe the host, not results of the arithmetic.
# Matched against the key name alone, at any depth.
IGNORED = re.compile(
    r"(^|_)(seconds|second|ms|us|ns|time|times|elapsed|started|created|wall|gflops|gbps|"
    r"throughput|memory|rss|allocations|cached|cache|host|hostname|pid|hardware|cpu|onednn|"
    r"max_isa|cpu_flags|backend|device|transfers)($|_)"
    r"|^block_cache$|^peak_bytes$|^peak_memory_bytes$|^samples_per_second$|^tokens_per_second$"
    r"|^peak_gflops$|^peak_gbytes_per_s$|_bytes$"
)
# Keys ending in _bytes are byte counts of memory (peak_bytes, cached_bytes, ...); these are
# counts of data, not memory use, and stay compared.
KEPT = {"bits_per_byte", "bytes"}

MAX_REPORTS = 4  # differences printed per file
MAX_LINES = 16  # lines printed per case

# Lists whose order is not part of the result (profile sorts its ops by measured time): their
# dicts are matched by these identity keys.
UNORDERED = {"ops": ("op", "phase", "dtype")}


def ignored(key, extra):
    return key not in KEPT and (key in extra or IGNORED.search(key) is not None)


def same_number(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


def fmt(v):
    if isinstance(v, float):
        return "%r (%s)" % (v, v.hex()) if math.isfinite(v) else repr(v)
    s = json.dumps(v)
    return s if len(s) <= 120 else s[:117] + "..."


def diff_json(a, b, path, extra, out):
    """Appends (path, a, b) for every difference of two JSON values to out."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if ignored(k, extra):
                continue
            p = "%s.%s" % (path, k)
            if k not in a or k not in b:
                out.append((p, a.get(k, "<missing>"), b.get(k, "<missing>")))
            elif k in UNORDERED and isinstance(a[k], list) and isinstance(b[k], list):
                ident = UNORDERED[k]
                def keyed(items):
                    return {tuple(str(x.get(i)) for i in ident) if isinstance(x, dict) else (json.dumps(x),): x
                            for x in items}
                ka, kb = keyed(a[k]), keyed(b[k])
                if len(ka) != len(a[k]) or len(kb) != len(b[k]):
                    diff_json(a[k], b[k], p, extra, out)  # identities not unique: by position
                else:
                    for ident_value in sorted(set(ka) | set(kb)):
                        q = "%s[%s]" % (p, "/".join(ident_value))
                        if ident_value not in ka or ident_value not in kb:
                            out.append((q, ka.get(ident_value, "<missing>"), kb.get(ident_value, "<missing>")))
                        else:
                            diff_json(ka[ident_value], kb[ident_value], q, extra, out)
            else:
                diff_json(a[k], b[k], p, extra, out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append((path + ".length", len(a), len(b)))
        for i, (x, y) in enumerate(zip(a, b)):
            diff_json(x, y, "%s[%d]" % (path, i), extra, out)
    elif isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if not same_number(a, b):
            out.append((path, a, b))
    elif a != b or type(a) is not type(b):
        out.append((path, a, b))


def load_json(path):
    with open(path, "rb") as f:
        return json.loads(f.read().decode("utf-8"))


def compare_jsonl(pa, pb, extra):
    la = open(pa, "rb").read().decode("utf-8").splitlines()
    lb = open(pb, "rb").read().decode("utf-8").splitlines()
    out = []
    if len(la) != len(lb):
        out.append(("lines", len(la), len(lb)))
    for i, (x, y) in enumerate(zip(la, lb)):
        x, y = json.loads(x), json.loads(y)
        where = "line %d" % (i + 1)
        if isinstance(x, dict):
            where += " (%s%s)" % (x.get("type", "?"), " %s" % x["epoch"] if "epoch" in x else "")
        diff_json(x, y, where + " ", extra, out)
    return out


DTYPES = {"F64": ("d", 8), "F32": ("f", 4), "F16": ("e", 2), "BF16": (None, 2), "I64": ("q", 8),
          "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1), "U8": ("B", 1), "U16": ("H", 2),
          "U32": ("I", 4), "U64": ("Q", 8), "BOOL": ("?", 1)}


def element(dtype, raw):
    code, _ = DTYPES.get(dtype, ("B", 1))
    if dtype == "BF16":
        bits = struct.unpack("<H", raw)[0]
        return "%r (bits 0x%04x)" % (struct.unpack("<f", struct.pack("<I", bits << 16))[0], bits)
    v = struct.unpack("<" + code, raw)[0]
    if dtype in ("F32", "F16", "F64"):
        bits = int.from_bytes(raw, "little")
        return "%r (bits 0x%0*x)" % (v, 2 * len(raw), bits)
    return repr(v)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n].decode("utf-8"))
    return header, memoryview(data)[8 + n:]


def compare_safetensors(pa, pb, extra):
    ha, da = read_safetensors(pa)
    hb, db = read_safetensors(pb)
    out = []
    diff_json(ha, hb, "header", extra, out)
    if out:
        return out
    for name in sorted(k for k in ha if k != "__metadata__"):
        t = ha[name]
        lo, hi = t["data_offsets"]
        xa, xb = da[lo:hi], db[lo:hi]
        if xa == xb:
            continue
        size = DTYPES.get(t["dtype"], (None, 1))[1]
        count = (hi - lo) // size
        bad = [i for i in range(count) if xa[i * size:(i + 1) * size] != xb[i * size:(i + 1) * size]]
        i = bad[0]
        ea = element(t["dtype"], bytes(xa[i * size:(i + 1) * size]))
        eb = element(t["dtype"], bytes(xb[i * size:(i + 1) * size]))
        out.append(("tensor %s (%s %s)" % (name, t["dtype"], t["shape"]),
                    "%d of %d elements differ; first at flat index %d: %s" % (len(bad), count, i, ea), eb))
    if len(da) != len(db):
        out.append(("payload bytes", len(da), len(db)))
    return out


def compare_bytes(pa, pb):
    a, b = open(pa, "rb").read(), open(pb, "rb").read()
    if a == b:
        return []
    la, lb = a.split(b"\n"), b.split(b"\n")
    i = next((k for k in range(min(len(la), len(lb))) if la[k] != lb[k]), min(len(la), len(lb)))
    def line(ls):
        return repr(ls[i].decode("utf-8", "replace")[:160]) if i < len(ls) else "<end of file>"
    return [("line %d (%d/%d bytes)" % (i + 1, len(a), len(b)), line(la), line(lb))]


SKIPPED = re.compile(r"(\.err|\.skip|^MANIFEST\.json|^\.mixprec-lock|^\.failed.*)$")


def files(root):
    found = set()
    for d, _, names in os.walk(root):
        for n in names:
            if not SKIPPED.search(n):
                found.add(os.path.relpath(os.path.join(d, n), root))
    return found


def main():
    case, da, db, na, nb = sys.argv[1:6]
    extra = set(filter(None, (sys.argv[6] if len(sys.argv) > 6 else "").split(",")))
    fa, fb = files(da), files(db)
    failed = []
    for only, name in ((fa - fb, na), (fb - fa, nb)):
        for f in sorted(only):
            failed.append("FAIL %s: %s wrote %s, the other backend did not" % (case, name, f))
    compared = {"tensors": 0, "json": 0, "bytes": 0}
    for rel in sorted(fa & fb, key=lambda r: (r.count(os.sep), r)):
        pa, pb = os.path.join(da, rel), os.path.join(db, rel)
        try:
            if rel.endswith(".safetensors"):
                diffs, kind = compare_safetensors(pa, pb, extra), "tensors"
            elif rel.endswith(".jsonl"):
                diffs, kind = compare_jsonl(pa, pb, extra), "json"
            elif rel.endswith(".json"):
                diffs, kind = [], "json"
                diff_json(load_json(pa), load_json(pb), "", extra, diffs)
            else:
                diffs, kind = compare_bytes(pa, pb), "bytes"
        except (ValueError, KeyError, struct.error, UnicodeDecodeError) as e:
            failed.append("FAIL %s: %s: cannot be read: %s" % (case, rel, e))
            continue
        compared[kind] += 1
        for path, a, b in diffs[:MAX_REPORTS]:
            failed.append("FAIL %s: %s: %s: %s %s vs %s %s"
                          % (case, rel, path.strip(), na, a if isinstance(a, str) and kind != "json" else fmt(a),
                             nb, b if isinstance(b, str) and kind != "json" else fmt(b)))
        if len(diffs) > MAX_REPORTS:
            failed.append("FAIL %s: %s: ... and %d more differences" % (case, rel, len(diffs) - MAX_REPORTS))
    if failed:
        print("\n".join(failed[:MAX_LINES]))
        if len(failed) > MAX_LINES:
            print("FAIL %s: ... %d more lines of differences" % (case, len(failed) - MAX_LINES))
        sys.exit(1)
    if not fa:
        print("FAIL %s: no output files to compare" % case)
        sys.exit(1)
    print("ok   %s: %s = %s bit for bit (%d checkpoint tensor files, %d JSON, %d text/CSV)"
          % (case, na, nb, compared["tensors"], compared["json"], compared["bytes"]))


if __name__ == "__main__":
    main()
