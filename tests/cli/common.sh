# Shared helpers of the CLI tests: each test script gets the mixprec executable as $1.
set -uo pipefail
MIXPREC="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
DATA_DIR=/usr/share/datasets/fashion-mnist
# bench and profile remember the best peaks they measure (train/machine_peaks_memory.h): the
# tests neither read nor write the user's ~/.cache/mixprec/machine_peaks.json; a test of the
# remembering names its own file under $WORK.
export MIXPREC_PEAKS_FILE=off
failures=0

# expect_failure NAME PATTERN CMD...: CMD must exit non-zero, print one line naming PATTERN on
# stderr, and not crash (exit status >= 128 means a signal, e.g. SIGSEGV or SIGABRT).
expect_failure() {
  local name="$1" pattern="$2"
  shift 2
  local err status
  err="$("$@" 2>&1 >/dev/null)"
  status=$?
  refused "$name" "$pattern" "$status" "$err" && echo "ok   $name: $(head -c 200 <<<"$err" | head -n 1)"
}

# refused NAME PATTERN STATUS ERR: the verdict of expect_failure on a command's exit status and
# stderr; prints a FAIL line and counts it (returning 1) unless it was a clean refusal.
refused() {
  local name="$1" pattern="$2" status="$3" err="$4"
  if [ "$status" -eq 0 ]; then
    echo "FAIL $name: exited 0"
  elif [ "$status" -ge 128 ]; then
    echo "FAIL $name: crashed with status $status: $err"
  elif ! grep -q -- "$pattern" <<<"$err"; then
    echo "FAIL $name: message lacks '$pattern': $err"
  else
    return 0
  fi
  failures=$((failures + 1))
  return 1
}

# require_python_packages MODULES PIP_NAMES: sets PY (MIXPREC_PYTHON, else python3) and checks
# that it imports MODULES (a Python import list). If not: exit 77, which ctest reports as
# skipped, or exit 1 when MIXPREC_REQUIRE_PYTHON_TESTS=1 (CI installs the packages: there a
# missing one is a failure, never a silent skip).
require_python_packages() {
  PY="${MIXPREC_PYTHON:-python3}"
  if ! "$PY" -c "import $1" 2>/dev/null; then
    echo "the Python packages $2 are missing: pip install $2"
    [ "${MIXPREC_REQUIRE_PYTHON_TESTS:-0}" = 1 ] && exit 1
    exit 77
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then echo "$failures failure(s)"; exit 1; fi
  echo "all passed"
}

# check NAME PATTERN FILE: FILE must contain PATTERN (grep); prints ok or FAIL and counts failures.
check() {
  if grep -q -- "$2" "$3"; then echo "ok   $1"; else echo "FAIL $1: no '$2' in:"; cat "$3"; failures=$((failures + 1)); fi
}

# class_fact "FACT...": facts of the CPU class in force, from the table (`mixprec env --json` and
# `mixprec env --classes --json`), space-separated, for tests that must hold on every class:
#   class            the class's name (the profile's, or the real CPU's)
#   own_level        a capping level below the class's best (sse4 on x86-64, neon on arm64)
#   foreign_level    a level of the other architecture (sve2 on x86-64, avx2 on arm64)
#   own_target       the Highway target(s) own_level really runs ('|' between alternatives)
#   scalar_target    the target MIXPREC_ISA=scalar runs
#   auto             what --precision auto picks there
# A target a level "really runs" is the real CPU's (a profile never executes what the CPU lacks).
class_fact() {
  local py="${MIXPREC_PYTHON:-python3}"
  "$MIXPREC" env --json 2>/dev/null > "$WORK/.env.json"
  "$MIXPREC" env --classes --json 2>/dev/null > "$WORK/.classes.json"
  "$py" - "$WORK/.env.json" "$WORK/.classes.json" "$1" <<'PY'
import json, sys
env = json.load(open(sys.argv[1]))
classes = {c["name"]: c for c in json.load(open(sys.argv[2]))}
reported, hardware = classes[env["cpu_class"]], classes[env["hardware_class"]]
arm = reported["arch"] == "arm64"
own = "neon" if arm else "sse4"
def runs(level):
    # A level the hardware has runs itself; one it lacks (above its best, or of the other
    # architecture) runs the hardware's best. Levels are listed lowest first.
    hw = {l["level"]: l["target"] for l in hardware["levels"]}
    return hw.get(level, hardware["levels"][-1]["target"])
facts = {"class": reported["name"], "own_level": own, "foreign_level": "avx2" if arm else "sve2",
         "own_target": runs(own), "scalar_target": runs("scalar"), "auto": reported["auto"]}
print(" ".join(facts[f] for f in sys.argv[3].split()))
PY
}

# check_target NAME TARGETS FILE: the `simd:` line of `mixprec env` output in FILE names one of
# TARGETS ('|'-separated alternatives, as the class table writes them).
check_target() {
  local got; got="$(sed -n 's/^simd: *\([A-Z0-9_]*\).*/\1/p' "$3")"
  if [[ "|$2|" == *"|$got|"* ]]; then echo "ok   $1: $got"; else
    echo "FAIL $1: simd target '$got', the class table says '$2'"; cat "$3"; failures=$((failures + 1)); fi
}
