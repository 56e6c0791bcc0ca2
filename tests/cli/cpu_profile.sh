#!/usr/bin/env bash
# MIXPREC_CPU_PROFILE: every class of the table (`mixprec env --classes`) can be simulated: `mixprec
# env` names it and recommends what the table says, `mixprec train --precision auto` picks that and
# trains (what executes stays capped to the real CPU: never an illegal instruction); an unknown
# name warns once, naming the known classes, and the real CPU is used.
source "$(dirname "$0")/common.sh"
PY="${MIXPREC_PYTHON:-python3}"

if ! "$MIXPREC" env --classes --json > "$WORK/classes.json"; then
  echo "FAIL env --classes --json: exit status $?"; exit 1
fi
mapfile -t rows < <("$PY" -c 'import json,sys
for c in json.load(open(sys.argv[1])): print(c["name"], c["auto"])' "$WORK/classes.json")
if ((${#rows[@]} < 6)); then echo "FAIL: only ${#rows[@]} classes listed"; exit 1; fi
hardware="$(MIXPREC_CPU_PROFILE= "$MIXPREC" env --json | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["hardware_class"])')"
echo "this CPU is class $hardware; ${#rows[@]} classes"

for row in "${rows[@]}"; do
  read -r class auto <<<"$row"
  if ! MIXPREC_CPU_PROFILE=$class "$MIXPREC" env --json > "$WORK/$class.json" 2> "$WORK/$class.err"; then
    echo "FAIL $class: env exit status $?"; cat "$WORK/$class.err"; failures=$((failures + 1)); continue
  fi
  got="$("$PY" -c 'import json,sys; e=json.load(open(sys.argv[1]))
print(e["cpu_class"], e.get("cpu_profile", "-"), e["hardware_class"], e["recommended"]["precision"])' "$WORK/$class.json")"
  if [ "$got" = "$class $class $hardware $auto" ]; then echo "ok   $class: env reports it, recommends $auto"; else
    echo "FAIL $class: env says '$got', want '$class $class $hardware $auto'"; failures=$((failures + 1)); fi
  if [ -s "$WORK/$class.err" ]; then echo "FAIL $class: a known profile warned:"; cat "$WORK/$class.err"; failures=$((failures + 1)); fi
  if grep -q "^profile:   $class (MIXPREC_CPU_PROFILE" <<<"$(MIXPREC_CPU_PROFILE=$class "$MIXPREC" env)"; then :; else
    echo "FAIL $class: no profile line in mixprec env"; failures=$((failures + 1)); fi
  # --precision auto decides as on the class, and the run completes on this CPU.
  if MIXPREC_CPU_PROFILE=$class "$MIXPREC" train --model mlp --precision auto --epochs 1 --limit-train 256 \
       --limit-test 64 --threads 1 --no-progress > "$WORK/$class.train" 2>&1; then
    check "$class train auto" "^auto precision: $auto:" "$WORK/$class.train"
    check "$class train ran" "test acc" "$WORK/$class.train"
  else
    echo "FAIL $class train: exit status $?"; tail -3 "$WORK/$class.train"; failures=$((failures + 1))
  fi
done

# An unknown profile: one warning naming every class, exit 0, the real CPU's class in force.
if MIXPREC_CPU_PROFILE=pentium4 "$MIXPREC" env > "$WORK/unknown" 2> "$WORK/unknown.err"; then
  check unknown_warns "MIXPREC_CPU_PROFILE=pentium4 is not a known CPU class" "$WORK/unknown.err"
  for row in "${rows[@]}"; do read -r class _ <<<"$row"; check "unknown_names_$class" "$class" "$WORK/unknown.err"; done
  check unknown_uses_real "^class:     $hardware " "$WORK/unknown"
  n="$(grep -c "warning" "$WORK/unknown.err")"
  if [ "$n" = 1 ]; then echo "ok   unknown_warns_once"; else echo "FAIL unknown: $n warnings"; failures=$((failures + 1)); fi
else
  echo "FAIL unknown profile: exit status $?"; cat "$WORK/unknown.err"; failures=$((failures + 1))
fi
finish
