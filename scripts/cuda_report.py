#!/usr/bin/env python3
"""The pieces of scripts/check-cuda.sh's report that need more than a shell: comparing two
training logs, summarising the device conformance run, and reading figures out of JSON output.

  cuda_report.py runs DEVICE.jsonl CPU.jsonl --rtol R --label L [--spread CPU2.jsonl]
      One markdown table row: the last epoch record of both `mixprec train --log` files, train and
      test loss relative differences (against R), skipped steps (must be equal), verdict; with
      --spread, the same differences between two cpu runs whose GEMMs sum in different orders
      (MIXPREC_ISA=avx2 against the native ISA): how far the run's own trajectory moves when
      only summation order changes, the context for the device's difference.
  cuda_report.py speed LABEL OURS.log PEER.log [--images]
      One markdown table row: the median step (ms), tokens/s where given and peak memory of our
      `mixprec bench --json` output and of a PyTorch peer's `--json` output, and their ratio
      (PyTorch's step / ours: above 1, ours is faster). --images: images/s (batch / median
      step) in place of tokens/s, for the image models (resnet50). A peer whose torch.compile
      failed (it then times the eager model) gets "(PyTorch compile failed: eager)" on its label.
  cuda_report.py conformance GTEST.json
      Passed/failed cases of the gtest JSON output, and each failure's first message line.
  cuda_report.py attention LOG...
      A markdown table of attention_step's and peer_sdpa.py's --json lines (forward and backward
      ms and TFLOP/s, PyTorch's backend), each against the PyTorch line of the same dtype.
  cuda_report.py gemm LOG...
      A markdown table of gemm_rate's and peer_scaled_mm.py's --json lines per shape: each GEMM
      (bf16, fp8, fp8 with fast accumulation) ours and PyTorch's (ms, TFLOP/s), ours against
      PyTorch's, and our fp8 against our bf16 (issue 37's targets: >= 1.6x at 8192^3, and at
      least torch._scaled_mm's rate).
  cuda_report.py steps BASE.log OTHER.log...
      A markdown table of `mixprec bench --json` outputs: each run's precision, median step (ms),
      tokens/s and peak memory, and its speed-up over the first (e.g. fp8 recipes against bf16).
  cuda_report.py fp8-state DEVICE.jsonl CPU.jsonl
      The fp8 recipe state of two `mixprec train --log` runs of the same steps (issue 37's
      identity target): per layer and role (input, weight, grad) whether the scale and the amax
      history's maximum are the same bits on the device and on the cpu, the largest relative
      amax difference, and a summary line. The weights' first amaxes agree exactly; later ones,
      and the activations' and gradients', follow GEMMs summed in another order, so a
      difference there is the run's own drift, which the scales (powers of two) mostly absorb.
  cuda_report.py quality BASE.jsonl OTHER.jsonl... [--target-pct P]
      A markdown table of the last epoch of `mixprec train --log` runs: precision, validation
      loss, skipped steps, and each against the first (issue 37: fp8 recipes within P% of bf16's
      validation loss, default 1).
  cuda_report.py field FILE KEY[.KEY...]
      One value out of a JSON document (or the first JSON line of a file that has several).
Exit status 0; a row or summary says FAIL where a check failed (the script collects them all).
"""
import json
import sys


def last_epoch(path):
    rec = None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                obj = json.loads(line)
                if obj.get("type") == "epoch":
                    rec = obj
    if rec is None:
        raise ValueError("%s has no epoch record" % path)
    return rec


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-30)


def runs(argv):
    dev, cpu = argv[0], argv[1]
    rtol = float(argv[argv.index("--rtol") + 1])
    label = argv[argv.index("--label") + 1]
    try:
        d, c = last_epoch(dev), last_epoch(cpu)
    except (OSError, ValueError) as e:
        print("| %s | - | - | - | - | - | FAIL: %s |" % (label, e))
        return
    test = "test_loss" if "test_loss" in c else "val_loss"  # language models: validation
    r_train = rel(d["train_loss"], c["train_loss"])
    r_test = rel(d[test], c[test])
    same_skips = d["skipped_steps"] == c["skipped_steps"]
    ok = r_train <= rtol and r_test <= rtol and same_skips
    spread = "-"
    if "--spread" in argv:
        try:
            c2 = last_epoch(argv[argv.index("--spread") + 1])
            spread = "%.2e / %.2e" % (rel(c2["train_loss"], c["train_loss"]),
                                      rel(c2[test], c[test]))
        except (OSError, ValueError) as e:
            spread = "n/a (%s)" % e
    print("| %s | %.6g / %.6g (%.2e) | %.6g / %.6g (%.2e) | %d / %d | %.3g | %s | %s |" % (
        label, d["train_loss"], c["train_loss"], r_train, d[test], c[test], r_test,
        d["skipped_steps"], c["skipped_steps"], rtol, spread, "ok" if ok else "FAIL"))


def first_json(path):
    """The first JSON document in a command's output (a list's first element)."""
    with open(path) as f:
        text = f.read()
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if not starts:
        raise ValueError("%s holds no JSON" % path)
    obj, _ = json.JSONDecoder().raw_decode(text[min(starts):])
    return obj[0] if isinstance(obj, list) else obj


def speed(argv):
    label, ours_path, peer_path = argv[0], argv[1], argv[2]
    try:
        ours, peer = first_json(ours_path), first_json(peer_path)
    except (OSError, ValueError, IndexError) as e:
        print("| %s | - | - | - | - | FAIL: %s |" % (label, e))
        return
    o_ms, p_ms = ours["step_ms"]["median"], peer["step_ms"]["median"]
    o_tok, p_tok = ours.get("tokens_per_second"), peer.get("tokens_per_second")
    if "--images" in argv[3:]:
        o_tok, p_tok = (r["batch_size"] / (r["step_ms"]["median"] / 1e3) for r in (ours, peer))
    if peer.get("compile") and not peer.get("compiled"):
        label += " (PyTorch compile failed: eager)"
    o_peak = ours.get("peak_bytes", {}).get("total")
    p_peak = peer.get("peak_device_bytes")
    mib = lambda b: "%.0f MiB" % (b / 2**20) if b else "-"
    tok = "%.0f / %.0f" % (o_tok, p_tok) if o_tok and p_tok else "-"
    print("| %s | %.2f / %.2f | %.2fx | %s | %s / %s |" % (
        label, o_ms, p_ms, p_ms / o_ms, tok, mib(o_peak), mib(p_peak)))


def conformance(argv):
    try:
        with open(argv[0]) as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        print("FAIL: no gtest JSON (%s)" % e)
        return
    passed, failed = 0, []
    for suite in doc.get("testsuites", []):
        for t in suite.get("testsuite", []):
            fails = t.get("failures", [])
            if fails:
                lines = fails[0].get("failure", "").strip().splitlines()
                # the location, then the assertion's own words (which values, which elements)
                failed.append((t["name"], " | ".join(l.strip() for l in lines[:6])))
            else:
                passed += 1
    print("%d passed, %d failed" % (passed, len(failed)))
    for name, msg in failed:
        print("- FAIL %s: %s" % (name, msg[:600]))


def field(argv):
    path, key = argv[0], argv[1]
    with open(path) as f:
        text = f.read()
    try:
        obj = json.loads(text)
    except ValueError:
        obj = json.loads(next(l for l in text.splitlines() if l.strip().startswith(("{", "["))))
    for k in key.split("."):
        obj = obj[int(k)] if isinstance(obj, list) else obj[k]
    print(obj)


def attention(argv):
    rows = []
    for path in argv:
        try:
            r = first_json(path)
        except (OSError, ValueError):
            continue
        if r is not None and "forward_ms" in r:
            r["label"] = path.rsplit("/", 1)[-1][:-4]
            rows.append(r)
    peer = {r["dtype"]: r for r in rows if r.get("impl") == "pytorch"}
    print("| run | dtype | forward ms (TFLOP/s) | backward ms (TFLOP/s) | fwd+bwd vs PyTorch |")
    print("|---|---|---|---|---|")
    for r in rows:
        p = peer.get(r["dtype"])
        ratio = ("%.2fx" % (p["forward_backward_ms"] / r["forward_backward_ms"])) if p and r is not p else ""
        name = r["label"] + (" (%s)" % r["backend"] if "backend" in r else "")
        print("| %s | %s | %.3f (%.1f) | %.3f (%.1f) | %s |" % (
            name, r["dtype"], r["forward_ms"], r["forward_tflops"], r["backward_ms"],
            r["backward_tflops"], ratio))
    if not rows:
        print("| (no attention figures: see the logs) | | | | |")


def json_lines(path):
    """Every line of a command's output that is a JSON object."""
    out = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:
                    pass
    return out


def gemm(argv):
    rows = [r for path in argv if _readable(path) for r in json_lines(path) if "gemm" in r]
    shapes = sorted({(r["m"], r["n"], r["k"]) for r in rows}, reverse=True)
    print("| shape m x n x k | GEMM | ours ms (TFLOP/s) | PyTorch ms (TFLOP/s) | ours vs PyTorch | vs our bf16 |")
    print("|---|---|---|---|---|---|")
    for shape in shapes:
        at = {(r["impl"], r["gemm"]): r for r in rows if (r["m"], r["n"], r["k"]) == shape}
        bf16 = at.get(("mixprec", "bf16"))
        for name in ("bf16", "fp8", "fp8-fast-accum"):
            ours, peer = at.get(("mixprec", name)), at.get(("pytorch", name))
            if ours is None and peer is None:
                continue
            cell = lambda r: ("%.3f (%.1f)" % (r["ms"], r["tflops"]) if r and "ms" in r
                              else (r.get("error", "") if r else ""))
            vs_peer = ("%.2fx" % (peer["ms"] / ours["ms"])) if ours and peer and "ms" in peer else ""
            vs_bf16 = ("%.2fx" % (bf16["ms"] / ours["ms"])) if ours and bf16 and name != "bf16" else ""
            print("| %s | %s | %s | %s | %s | %s |" % ("x".join(map(str, shape)), name, cell(ours),
                                                      cell(peer), vs_peer, vs_bf16))
    if not rows:
        print("| (no GEMM figures: see the logs) | | | | | |")


def steps(argv):
    print("| run | precision | step ms | tokens/s | peak memory | speed-up over %s |" % argv[0].rsplit("/", 1)[-1][:-4])
    print("|---|---|---|---|---|---|")
    base = None
    for i, path in enumerate(argv):
        label = path.rsplit("/", 1)[-1][:-4]
        try:
            r = first_json(path)
            ms = r["step_ms"]["median"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print("| %s | - | - | - | - | FAIL: %s |" % (label, e))
            continue
        if i == 0:
            base = ms
        tok = r.get("tokens_per_second")
        peak = r.get("peak_bytes", {}).get("total")
        print("| %s | %s | %.2f | %s | %s | %s |" % (
            label, r.get("precision", "?"), ms, "%.0f" % tok if tok else "-",
            "%.1f MiB" % (peak / 2**20) if peak else "-", "%.2fx" % (base / ms) if base else "-"))


def fp8_state(argv):
    dev, cpu = last_epoch(argv[0]).get("fp8") or {}, last_epoch(argv[1]).get("fp8") or {}
    if not dev or not cpu:
        print("FAIL: no fp8 state in %s" % (argv[0] if not dev else argv[1]))
        return
    print("| layer | role | scale device / cpu | amax history device / cpu | amax rel diff |")
    print("|---|---|---|---|---|")
    same_scale = same_hist = total = 0
    worst = 0.0
    for layer in sorted(set(dev) | set(cpu)):
        for role in ("input", "weight", "grad"):
            d, c = dev.get(layer, {}).get(role), cpu.get(layer, {}).get(role)
            if d is None or c is None:
                print("| %s | %s | FAIL: missing on %s | | |" % (layer, role, "device" if d is None else "cpu"))
                continue
            total += 1
            same_scale += d["scale"] == c["scale"]
            same_hist += d["amax_history"] == c["amax_history"]
            r = rel(d["amax"], c["amax"]) if c["amax"] else abs(d["amax"])
            worst = max(worst, r)
            print("| %s | %s | %g / %g%s | %g / %g%s | %.2e |" % (
                layer, role, d["scale"], c["scale"], "" if d["scale"] == c["scale"] else " (differ)",
                d["amax_history"], c["amax_history"], "" if d["amax_history"] == c["amax_history"] else " (differ)", r))
    print("")
    print("fp8 state after the run: scales identical in %d of %d (layer, role) pairs, amax history "
          "maxima identical in %d of %d; largest relative amax difference %.2e." % (
              same_scale, total, same_hist, total, worst))


def quality(argv):
    target = 1.0
    if "--target-pct" in argv:
        i = argv.index("--target-pct")
        target = float(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    print("| run | precision | validation loss | skipped steps | against the first | verdict |")
    print("|---|---|---|---|---|---|")
    base = None
    for i, path in enumerate(argv):
        label = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
        try:
            rec = last_epoch(path)
            cfg = json.loads(open(path).readline()).get("config", {})
            val = rec["val_loss"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            print("| %s | - | - | - | - | FAIL: %s |" % (label, e))
            continue
        if i == 0:
            base = val
            print("| %s | %s | %.4f | %s | | |" % (label, cfg.get("precision", "?"), val, rec.get("skipped_steps")))
            continue
        pct = 100.0 * (val - base) / base if base else float("nan")
        verdict = "ok" if abs(pct) <= target or pct < 0 else "FAIL (target within %g%%)" % target
        print("| %s | %s | %.4f | %s | %+.2f%% | %s |" % (label, cfg.get("precision", "?"), val,
                                                          rec.get("skipped_steps"), pct, verdict))


def _readable(path):
    try:
        with open(path):
            return True
    except OSError:
        return False


def main():
    commands = {"runs": runs, "speed": speed, "conformance": conformance, "field": field,
                "attention": attention, "gemm": gemm, "steps": steps, "fp8-state": fp8_state,
                "quality": quality}
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        sys.exit(__doc__)
    try:
        commands[sys.argv[1]](sys.argv[2:])
    except (IndexError, KeyError, ValueError, OSError) as e:
        print("FAIL: %s" % e)


if __name__ == "__main__":
    main()
