# Shared by the tests/dist/*.sh scripts that run `mixprec train` under mpirun: sourced after
# MPIRUN and MIXPREC are set. Provides WORK (a temporary directory, removed at exit), the
# failure count, and:
#   run NAME NP ARGS...          one process when NP is 1, else mpirun -np NP; the JSONL log goes
#                                to $WORK/NAME.jsonl, the output to $WORK/NAME.out
#   compare A B KEYS TOLERANCE   per-epoch relative differences of the logs' KEYS (comma-separated)
#   expect_refusal NAME PATTERN NP ARGS...   the run must fail (not time out) printing PATTERN
#   finish                       prints the verdict and exits non-zero on any failure
source "$(dirname "${BASH_SOURCE[0]}")/mpirun_flags.sh"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0

run() {
  local name=$1 np=$2
  shift 2
  if [ "$np" -eq 1 ]; then
    "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" > "$WORK/$name.out" 2>&1
  else
    timeout 300 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" \
      > "$WORK/$name.out" 2>&1
  fi
  local status=$?
  if [ "$status" -ne 0 ]; then echo "FAIL $name: exit $status"; cat "$WORK/$name.out"; failures=$((failures + 1)); fi
}

compare() {
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$4" <<'PY' || failures=$((failures + 1))
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])][1:]
b = [json.loads(l) for l in open(sys.argv[2])][1:]
keys, tol = sys.argv[3].split(","), float(sys.argv[4])
assert len(a) == len(b) and a, f"epochs: {len(a)} vs {len(b)}"
bad = []
for x, y in zip(a, b):
    for k in keys:
        rel = abs(x[k] - y[k]) / max(abs(x[k]), 1e-30)
        if rel > tol:
            bad.append(f"epoch {x['epoch']} {k}: {x[k]} vs {y[k]} (rel {rel:.2e})")
name = sys.argv[1].rsplit("/", 1)[-1] + " vs " + sys.argv[2].rsplit("/", 1)[-1]
if bad:
    print("FAIL", name, "; ".join(bad))
    sys.exit(1)
print("ok  ", name, "agree on", ",".join(keys), "within", tol)
PY
}

expect_refusal() {
  local name=$1 pattern=$2 np=$3
  shift 3
  local out status
  if [ "$np" -eq 1 ]; then
    out=$(timeout 120 "$MIXPREC" train "$@" 2>&1)
  else
    out=$(timeout 120 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "$@" 2>&1)
  fi
  status=$?
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] || ! grep -q -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $status: $(grep -m1 mixprec <<<"$out")"; failures=$((failures + 1))
  else
    echo "ok   $name: $(grep -m1 'mixprec:' <<<"$out")"
  fi
}

finish() {
  [ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
}
