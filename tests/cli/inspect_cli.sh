#!/usr/bin/env bash
# `mixprec inspect` end to end: --json parses and has one entry per layer of the mlp, --svg
# writes a picture, and the text report names every layer and verdict.
source "$(dirname "$0")/common.sh"
if ! command -v python3 > /dev/null; then echo "SKIP: python3 is needed to parse the JSON"; exit 77; fi

json="$("$MIXPREC" inspect --model mlp --precision bf16 --steps 2 --batch-size 32 --threads 1 --json)" || {
  echo "FAIL inspect --json: exit status $?"; exit 1; }
if python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
paths = [l["path"] for l in r["layers"]]
assert paths == ["layers.%d" % i for i in range(5)], paths
verdicts = {"safe in fp16", "needs loss scaling", "bf16 fine", "keep in fp32"}
assert all(l["verdict"] in verdicts for l in r["layers"])
assert r["precision"] == "bf16" and r["steps"] == 2 and len(r["losses"]) == 2
assert any(w["layer"] == "layers.4" and w["size"] == 10 for w in r["alignment"])
assert [m["persistent_bytes_per_parameter"] for m in r["memory"]["model"]] == [16, 16, 16, 12]
' <<<"$json"; then echo "ok   inspect_json"; else echo "FAIL inspect_json: $json" | head -c 2000; failures=$((failures + 1)); fi

out="$("$MIXPREC" inspect --model mlp --precision fp16 --steps 2 --batch-size 32 --threads 1 --svg "$WORK/layers.svg")" || {
  echo "FAIL inspect --svg: exit status $?"; exit 1; }
if head -c 4 "$WORK/layers.svg" | grep -q '<svg' && grep -q 'layers.4' "$WORK/layers.svg"; then
  echo "ok   inspect_svg"
else
  echo "FAIL inspect_svg: no picture in $WORK/layers.svg"; failures=$((failures + 1))
fi
for want in layers.0 layers.4 "loss scaling: GradScaler" "memory per parameter" "verdict"; do
  grep -q -- "$want" <<<"$out" || { echo "FAIL inspect_text: no '$want' in the report"; failures=$((failures + 1)); }
done
finish
