"""Checks a `mixprec train --tensorboard DIR --log LOG` run with the real tensorboard package.

usage: tensorboard_check.py DIR LOG HISTOGRAM_EVERY
  - DIR loads in tensorboard's EventAccumulator (every event kept);
  - per step: train/loss, train/lr, train/loss_scale, train/grad_norm, train/skipped, one event
    per optimizer step (steps 0..S-1, S = optimizer steps + skipped steps of the log), and the
    skips are the log's skipped_steps;
  - per epoch: epoch/<key> equals the JSONL value of every number of each epoch line (as f32,
    TensorBoard's simple_value), and memory/<category> its peak memory;
  - weight_log2/<path> and grad_log2/<path> histograms every HISTOGRAM_EVERY steps, counting
    the parameter's nonzero elements at most; precision_ranges as text.
"""
import json
import sys

import numpy as np
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator


def main():
    directory, log, every = sys.argv[1], sys.argv[2], int(sys.argv[3])
    acc = EventAccumulator(directory, size_guidance={"scalars": 0, "histograms": 0, "tensors": 0})
    acc.Reload()
    tags = acc.Tags()
    lines = [json.loads(l) for l in open(log)]
    epochs = [l for l in lines if l.get("type") == "epoch"]
    assert epochs, "the log has no epoch line"
    steps = epochs[-1]["optimizer_steps"] + sum(e["skipped_steps"] for e in epochs)

    for tag in ("train/loss", "train/lr", "train/loss_scale", "train/grad_norm", "train/skipped"):
        assert tag in tags["scalars"], f"{tag} missing; scalars: {sorted(tags['scalars'])[:20]}"
        got = [e.step for e in acc.Scalars(tag)]
        assert got == list(range(steps)), f"{tag}: steps {got[:5]}..{got[-3:]} ({len(got)}), expected 0..{steps - 1}"
    skipped = sum(e.value for e in acc.Scalars("train/skipped"))
    assert skipped == sum(e["skipped_steps"] for e in epochs), (skipped, [e["skipped_steps"] for e in epochs])

    checked = 0
    for e in epochs:
        for key, value in e.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            tag = "epoch/" + key
            events = [x for x in acc.Scalars(tag) if x.step == e["epoch"]]
            assert len(events) == 1, f"{tag} at epoch {e['epoch']}: {len(events)} events"
            assert events[0].value == float(np.float32(value)), (tag, events[0].value, value)
            checked += 1
        for category, value in e["peak_memory_bytes"].items():
            events = [x for x in acc.Scalars("memory/" + category) if x.step == e["epoch"]]
            assert len(events) == 1 and events[0].value == float(np.float32(value)), (category, events, value)
            checked += 1

    weights = [t for t in tags["histograms"] if t.startswith("weight_log2/")]
    grads = [t for t in tags["histograms"] if t.startswith("grad_log2/")]
    assert weights and len(grads) == len(weights), (weights, grads)
    for tag in weights + grads:
        hs = acc.Histograms(tag)
        assert [h.step for h in hs] == list(range(0, steps, every)), (tag, [h.step for h in hs])
        for h in hs:
            v = h.histogram_value
            assert v.num > 0 and sum(v.bucket) == v.num, (tag, v.num, sum(v.bucket))
            assert -150 <= v.min <= v.max <= 20, (tag, v.min, v.max)
    underflow = [t for t in tags["scalars"] if t.startswith("fp16_underflow/")]
    assert len(underflow) == len(grads), underflow
    assert "precision_ranges" in tags["tensors"], tags["tensors"]
    text = acc.Tensors("precision_ranges")[0].tensor_proto.string_val[0].decode()
    assert "65504" in text and "2^-24" in text, text
    print(f"ok   tensorboard reads {steps} steps x 5 scalars, {checked} epoch values equal to the log, "
          f"{len(weights) + len(grads)} histogram series every {every} steps, the precision ranges")


if __name__ == "__main__":
    main()
