#!/usr/bin/env bash
# Peak activation memory of one gpt-mini training step against the context length, from the
# memory tracker (`mixprec bench --json`, peak_bytes.activation): linear in T when no T x T
# tensor is kept (blocked attention), quadratic otherwise. Memory, not time: the figures do not
# depend on the machine's load.
# Usage: bench/attention_memory.sh [MIXPREC] [PRECISION] [CONTEXTS...]
#   (defaults: build/mixprec bf16 256 512 1024 2048; batch 1)
set -euo pipefail
MIXPREC="${1:-build/mixprec}"
PRECISION="${2:-bf16}"
shift $(( $# > 2 ? 2 : $# ))
CONTEXTS=("${@:-256 512 1024 2048}")
[ $# -eq 0 ] && CONTEXTS=(256 512 1024 2048)
printf "%8s %16s %18s %26s\n" context "activation MiB" "per token KiB" "one layer's T x T f32 MiB"
for T in "${CONTEXTS[@]}"; do
  "$MIXPREC" bench --model gpt-mini --precision "$PRECISION" --context "$T" --batch-size 1 \
      --steps 1 --warmup 0 --json 2>/dev/null |
    python3 -c "
import json, sys
r = json.load(sys.stdin)
a = r['peak_bytes']['activation']
heads = 4
print('%8d %16.2f %18.2f %26.1f' % ($T, a / 2**20, a / $T / 1024, heads * $T * $T * 4 / 2**20))"
done
