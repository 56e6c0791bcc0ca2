# Shared helpers of the CLI tests: each test script gets the mixprec executable as $1.
set -uo pipefail
MIXPREC="$1"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
DATA_DIR=/usr/share/datasets/fashion-mnist
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
