#!/usr/bin/env bash
# dist.train_faults: faults of `mpirun -np N mixprec train` and resumption on another rank count.
# Ranks are pointed at different files by small wrappers that mpirun starts in place of mixprec
# (every rank gets the same flags; relative paths resolve in a per-rank working directory):
#  - set-up failing on one rank only: --resume ckpt missing on rank 1; rank 1's copy with one
#    flipped byte (SHA-256 mismatch); rank 1 holding an older but intact checkpoint; --data-dir
#    missing on rank 1; a shorter text corpus on rank 1; rank 1 started with another --lr.
#    Every rank must print the refusal naming rank 1 and the reason, and mpirun must exit
#    non-zero within 20 s (the exit timeout that ends a rank failing alone is 30 s, so a
#    missing agreement fails this);
#  - a failure of rank 0 alone in the middle of training (its --checkpoint-dir cannot be
#    created): the job ends within 20 s (MPI_Abort from the top-level handler);
#  - a rank killed with SIGKILL mid-training (rank 1 between checkpoints; rank 0 while it writes
#    a checkpoint): mpirun exits non-zero within 20 s of the kill, --checkpoint-dir holds only
#    complete checkpoints (every file matching its manifest's size and SHA-256; the half-written
#    one stays a hidden .tmp-* directory), and resuming from it on 2 ranks reproduces an
#    uninterrupted single-process run (the resumed run's next save removes the stale .tmp-*);
#  - resume across rank counts: a 2-rank checkpoint after epoch 1 continued on 1 process and on 3
#    ranks, a 1-process checkpoint continued on 2 ranks, a 2-rank checkpoint written inside epoch
#    2 (--max-steps) finished on 3 ranks: per-epoch losses and accuracy within 1e-6 of an
#    uninterrupted single-process run, samples and steps equal; fp16 (2 ranks, then 3) skips the
#    same steps with the same scale as one process.
# Usage: train_faults.sh MPIRUN MIXPREC
set -uo pipefail
MPIRUN=$1 MIXPREC=$(realpath "$2")  # absolute: the wrappers change directory
source "$(dirname "${BASH_SOURCE[0]}")/mpirun_flags.sh" || exit 1
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
failures=0
LIMIT=20  # seconds within which every failing job must end
BASE=(--model mlp --limit-train 768 --limit-test 300 --batch-size 96 --threads 1 --no-progress
      --scheduler none --seed 4 --precision fp32)
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
within_limit() { python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < $LIMIT else 1)" "$1"; }

# Wrappers that mpirun starts in place of mixprec. The rank comes from Open MPI (or PMIx/PMI).
cat > "$WORK/in_rank_dir.sh" <<'EOF'
#!/usr/bin/env bash
# Runs the command in $FAULTS_DIR/rank<R>, so that relative paths differ between ranks.
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}
cd "$FAULTS_DIR/rank$r" || exit 99
exec "$@"
EOF
cat > "$WORK/rank1_lr.sh" <<'EOF'
#!/usr/bin/env bash
# Rank 1 gets another learning rate (a repeated flag takes its last value).
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}
if [ "$r" = 1 ]; then exec "$@" --lr 0.002; fi
exec "$@"
EOF
cat > "$WORK/record_pid.sh" <<'EOF'
#!/usr/bin/env bash
# Records the rank's pid (exec keeps it: it is mixprec's) in $FAULTS_DIR/pid.<R>.
r=${OMPI_COMM_WORLD_RANK:-${PMIX_RANK:-${PMI_RANK:-0}}}
echo $$ > "$FAULTS_DIR/pid.$r.tmp" && mv "$FAULTS_DIR/pid.$r.tmp" "$FAULTS_DIR/pid.$r"
exec "$@"
EOF
chmod +x "$WORK"/*.sh

# Per-rank working directories for the set-up faults.
rank_dirs() {  # rank_dirs NP: empty $WORK/ranks/rank0..rank<NP-1>
  rm -rf "$WORK/ranks"
  for ((r = 0; r < $1; ++r)); do mkdir -p "$WORK/ranks/rank$r"; done
}

# expect_agreed_refusal NAME NP PATTERN WRAPPER ARGS...: the job must exit non-zero within LIMIT
# seconds, and every rank must print a line matching PATTERN (grep -E): NP matching lines.
expect_agreed_refusal() {
  local name=$1 np=$2 pattern=$3 wrapper=$4
  shift 4
  local start out status took lines
  start=$(now)
  out=$(FAULTS_DIR="$WORK/ranks" timeout 120 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" -x FAULTS_DIR \
          "$WORK/$wrapper" "$MIXPREC" train "$@" 2>&1)
  status=$?
  took=$(since "$start")
  lines=$(grep -c -E -- "$pattern" <<<"$out")
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "$name: exit $status after ${took}s"; grep 'mixprec' <<<"$out" | head -n 5
  elif ! within_limit "$took"; then
    fail "$name: the job took ${took}s to end (limit ${LIMIT}s)"; grep 'mixprec' <<<"$out" | head -n 5
  elif [ "$lines" -ne "$np" ]; then
    fail "$name: $lines of $np ranks printed /$pattern/:"; grep 'mixprec' <<<"$out" | head -n 5
  else
    echo "ok   $name: every rank refused, exit $status after ${took}s: $(grep -m1 -E -- "$pattern" <<<"$out")"
  fi
}

# --- Set-up faults on one rank -----------------------------------------------------------------
"$MIXPREC" train "${BASE[@]}" --epochs 2 --checkpoint-dir "$WORK/ckpt" > "$WORK/ckpt.out" 2>&1 ||
  { fail "writing the checkpoints for the resume faults"; cat "$WORK/ckpt.out"; }

rank_dirs 2
cp -r "$WORK/ckpt" "$WORK/ranks/rank0/ckpt"
expect_agreed_refusal resume_missing_on_rank1 2 \
  "failed on rank 1 of 2: load_checkpoint: checkpoint 'ckpt': no such file or directory" \
  in_rank_dir.sh --resume ckpt --epochs 3

rank_dirs 3
for r in 0 1 2; do cp -r "$WORK/ckpt" "$WORK/ranks/rank$r/ckpt"; done
python3 - "$WORK/ranks/rank1/ckpt/epoch-0002/model.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0x01
open(p, "wb").write(b)
PY
expect_agreed_refusal resume_corrupt_on_rank1 3 \
  "failed on rank 1 of 3: load_checkpoint: checkpoint 'ckpt/epoch-0002': model.safetensors is damaged \(sha256 mismatch" \
  in_rank_dir.sh --resume ckpt --epochs 3

# Rank 1 holds only the older checkpoint (a stale node-local copy): intact and of the same run,
# but not the state the others resume.
rank_dirs 2
cp -r "$WORK/ckpt" "$WORK/ranks/rank0/ckpt"
mkdir "$WORK/ranks/rank1/ckpt" && cp -r "$WORK/ckpt/epoch-0001" "$WORK/ranks/rank1/ckpt/"
expect_agreed_refusal resume_stale_on_rank1 2 \
  "the checkpoint to resume from differs between ranks: rank 0 has 'ckpt/epoch-0002 .*' but rank 1 has 'ckpt/epoch-0001 " \
  in_rank_dir.sh --resume ckpt --epochs 3

rank_dirs 2
DATA_DIR=/usr/share/datasets/fashion-mnist
ln -s "$DATA_DIR" "$WORK/ranks/rank0/data"
expect_agreed_refusal data_missing_on_rank1 2 \
  "loading the data and building the model failed on rank 1 of 2: read_idx: data/train-images-idx3-ubyte.gz: the file is missing" \
  in_rank_dir.sh "${BASE[@]}" --epochs 1 --data-dir data

# Rank 1's copy of a text corpus is shorter: its epochs would have fewer batches than the
# others' (and so fewer collectives: a hang), so the ranks compare what they loaded.
rank_dirs 2
python3 -c "
import sys
for i in range(300):
    print(f'line {i} of a small text corpus for the test, with a few words in it.')" > "$WORK/ranks/rank0/corpus.txt"
head -n 250 "$WORK/ranks/rank0/corpus.txt" > "$WORK/ranks/rank1/corpus.txt"
expect_agreed_refusal text_shorter_on_rank1 2 \
  "the data loaded \(source and sizes\) differs between ranks: rank 0 has '.*\"bytes\":20[0-9]+.*' but rank 1 has '.*\"bytes\":17[0-9]+" \
  in_rank_dir.sh --model gpt-mini --data text:corpus.txt --context 32 --batch-size 8 --epochs 1 --threads 1 --no-progress

expect_agreed_refusal other_lr_on_rank1 3 \
  "comparing the training flags with rank 0's failed on rank 1 of 3: its configuration has lr = 0.002 where rank 0 has 0.001" \
  rank1_lr.sh "${BASE[@]}" --epochs 1

# --- Rank 0 fails alone during training ----------------------------------------------------------
# Its checkpoint directory cannot be created: at set-up (the directory lock) or, failing that, at
# the first checkpoint, the ranks agree on how it went, so every rank stops with the same
# message, promptly.
: > "$WORK/a_file"
start=$(now)
out=$(timeout 120 "$MPIRUN" -np 2 "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "${BASE[@]}" --epochs 3 \
        --checkpoint-dir "$WORK/a_file/ckpt" 2>&1)
status=$?
took=$(since "$start")
if [ "$status" -eq 0 ] || [ "$status" -eq 124 ] ||
   ! within_limit "$took" ||
   ! grep -qE "mixprec: dist.agree: (setting up training|writing the checkpoint) failed on rank 0 of 2: .*make_directories: cannot create directory" <<<"$out"; then
  fail "rank0_cannot_write: exit $status after ${took}s: $(grep -m1 'mixprec:' <<<"$out")"
else
  echo "ok   rank0_cannot_write: exit $status after ${took}s: $(grep -m1 'mixprec:' <<<"$out")"
fi

# --- A rank killed mid-training --------------------------------------------------------------
# check_checkpoint_dir DIR NAME: every visible entry is a complete checkpoint whose files match
# the manifest's sizes and SHA-256 (checked here in Python, not by mixprec); hidden entries may
# only be .tmp-* directories of unfinished saves (and the run's .mixprec-lock). Prints what it found.
check_checkpoint_dir() {
  python3 - "$1" "$2" <<'PY' || failures=$((failures + 1))
import hashlib, json, os, sys
d, name = sys.argv[1], sys.argv[2]
bad, complete, hidden = [], [], []
for e in sorted(os.listdir(d)):
    p = os.path.join(d, e)
    if e == ".mixprec-lock":  # the run's directory lock (io/directory_lock.h), not a save
        continue
    if e.startswith("."):
        hidden.append(e)
        if not e.startswith(".tmp-"):
            bad.append(f"unexpected hidden entry {e}")
        continue
    m = os.path.join(p, "MANIFEST.json")
    if not os.path.isfile(m):
        bad.append(f"{e} has no MANIFEST.json (a partial checkpoint)")
        continue
    for f, meta in json.load(open(m))["files"].items():
        data = open(os.path.join(p, f), "rb").read()
        if len(data) != meta["bytes"] or hashlib.sha256(data).hexdigest() != meta["sha256"]:
            bad.append(f"{e}/{f} does not match its manifest")
    complete.append(e)
if bad or not complete:
    print(f"FAIL {name}: {'; '.join(bad) or 'no complete checkpoint'}")
    sys.exit(1)
print(f"ok   {name}: complete checkpoints {complete}, verified; hidden unfinished saves {hidden}")
PY
}

# kill_rank NAME VICTIM MODE: 2 ranks train many epochs with a checkpoint after each; once
# epoch-0002 is complete, VICTIM gets SIGKILL: MODE "between" at once, MODE "writing" as soon as
# the next checkpoint's temporary directory appears (rank 0 is then inside save_checkpoint).
kill_rank() {
  local name=$1 victim=$2 mode=$3 dir="$WORK/$1"
  mkdir -p "$dir"
  FAULTS_DIR="$dir" timeout 120 "$MPIRUN" -np 2 "${MPIRUN_FLAGS[@]}" -x FAULTS_DIR "$WORK/record_pid.sh" \
    "$MIXPREC" train "${BASE[@]}" --epochs 400 --checkpoint-dir "$dir/ck" --keep-checkpoints 2 \
    --log "$dir/killed.jsonl" > "$dir/out" 2>&1 &
  local job=$! killed_at
  killed_at=$(python3 - "$dir/ck" "$dir/pid.$victim" "$mode" <<'PY'
import os, signal, sys, time
ck, pidfile, mode = sys.argv[1:]
deadline = time.time() + 90
while not (os.path.exists(os.path.join(ck, "epoch-0002", "MANIFEST.json")) and os.path.exists(pidfile)):
    if time.time() > deadline:
        sys.exit("no checkpoint epoch-0002 within 90 s")
    time.sleep(0.01)
pid = int(open(pidfile).read())
seen = []
if mode == "writing":
    start = time.time()
    while not seen and time.time() - start < 20:
        seen = [e for e in os.listdir(ck) if e.startswith(".tmp-")]
os.kill(pid, signal.SIGKILL)
print(time.time(), seen[0] if seen else "")
PY
)
  local status took
  wait "$job"
  status=$?
  if [ -z "$killed_at" ]; then fail "$name: could not kill rank $victim"; cat "$dir/out"; return; fi
  read -r killed_at tmp <<<"$killed_at"
  took=$(since "$killed_at")
  if [ "$status" -eq 0 ] || [ "$status" -eq 124 ]; then
    fail "$name: mpirun exited $status"; tail -n 5 "$dir/out"
  elif ! within_limit "$took"; then
    fail "$name: the job ended ${took}s after the kill (limit ${LIMIT}s)"
  else
    echo "ok   $name: rank $victim killed${tmp:+ while writing $tmp}; mpirun exited $status ${took}s later"
  fi
  if [ "$mode" = writing ] && [ -z "$tmp" ]; then fail "$name: no checkpoint write was seen to kill into"; fi
  check_checkpoint_dir "$dir/ck" "$name"
}
kill_rank kill_rank1 1 between
kill_rank kill_rank0_writing 0 writing

# The killed run resumes on 2 ranks from its newest complete checkpoint and ends where an
# uninterrupted single-process run does; its first save removes the dead rank's .tmp-* leftover.
"$MIXPREC" train "${BASE[@]}" --epochs 4 --log "$WORK/straight4.jsonl" > /dev/null 2>&1 ||
  fail "the uninterrupted 4-epoch run"
resumed_ok=1
timeout 120 "$MPIRUN" -np 2 "${MPIRUN_FLAGS[@]}" "$MIXPREC" train --resume "$WORK/kill_rank0_writing/ck" \
  --epochs 4 --log "$WORK/resumed4.jsonl" > "$WORK/resumed4.out" 2>&1 ||
  { fail "resuming the killed run"; cat "$WORK/resumed4.out"; resumed_ok=0; }
if [ "$resumed_ok" -eq 1 ]; then
  leftovers=$(find "$WORK/kill_rank0_writing/ck" -maxdepth 1 -name '.tmp-*' | wc -l)
  [ "$leftovers" -eq 0 ] && echo "ok   the resumed run's save removed the killed rank's unfinished save" ||
    fail "$leftovers .tmp-* directories left after the resumed run saved"
fi

# --- Resume across rank counts -----------------------------------------------------------------
run() {  # run NAME NP ARGS...: one process when NP is 1, else mpirun; log in $WORK/NAME.jsonl
  local name=$1 np=$2
  shift 2
  if [ "$np" -eq 1 ]; then
    timeout 300 "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" > "$WORK/$name.out" 2>&1
  else
    timeout 300 "$MPIRUN" -np "$np" "${MPIRUN_FLAGS[@]}" "$MIXPREC" train "$@" --log "$WORK/$name.jsonl" \
      > "$WORK/$name.out" 2>&1
  fi
  local status=$?
  if [ "$status" -ne 0 ]; then fail "$name: exit $status"; cat "$WORK/$name.out"; fi
}

compare() {  # compare A B EXACT_KEYS CLOSE_KEYS: every epoch; CLOSE_KEYS within a relative 1e-6
  python3 - "$WORK/$1.jsonl" "$WORK/$2.jsonl" "$3" "$4" <<'PY' || failures=$((failures + 1))
import json, sys
rows = lambda p: [r for r in map(json.loads, open(p)) if r["type"] == "epoch"]
a, b = rows(sys.argv[1]), rows(sys.argv[2])
exact, close = sys.argv[3].split(","), sys.argv[4].split(",") if sys.argv[4] else []
name = sys.argv[2].rsplit("/", 1)[-1].removesuffix(".jsonl")
if len(a) != len(b) or not a:
    sys.exit(print(f"FAIL {name}: {len(b)} epochs logged, expected {len(a)}") or 1)
bad, worst = [], 0.0
for x, y in zip(a, b):
    for k in exact:
        if x[k] != y[k]:
            bad.append(f"epoch {x['epoch']} {k}: {x[k]} vs {y[k]}")
    for k in close:
        rel = abs(x[k] - y[k]) / max(abs(x[k]), 1e-30)
        worst = max(worst, rel)
        if rel > 1e-6:
            bad.append(f"epoch {x['epoch']} {k}: {x[k]} vs {y[k]} (rel {rel:.2e})")
if bad:
    sys.exit(print(f"FAIL {name}: " + "; ".join(bad)) or 1)
print(f"ok   {name}: {len(b)} epochs match one uninterrupted process ({','.join(exact)} equal; "
      f"{','.join(close) or '-'} within 1e-6, worst {worst:.1e})")
PY
}
EXACT=epoch,optimizer_steps,train_samples,epoch_batches,complete
CLOSE=train_loss,test_loss,test_accuracy

compare straight4 resumed4 "$EXACT" "$CLOSE"

run one 1 "${BASE[@]}" --epochs 2
run two_first 2 "${BASE[@]}" --epochs 1 --checkpoint-dir "$WORK/ck_two"
run one_first 1 "${BASE[@]}" --epochs 1 --checkpoint-dir "$WORK/ck_one"
for target in 1 3; do
  cp -r "$WORK/ck_two" "$WORK/ck_two_to_$target"
  run "two_then_$target" "$target" --resume "$WORK/ck_two_to_$target" --checkpoint-dir "$WORK/ck_two_to_$target" --epochs 2
  compare one "two_then_$target" "$EXACT" "$CLOSE"
done
run one_then_2 2 --resume "$WORK/ck_one" --epochs 2
compare one one_then_2 "$EXACT" "$CLOSE"
# A checkpoint inside epoch 2 (8 steps per epoch; --max-steps 11), finished on 3 ranks: the
# epoch's sums (loss, samples, norms) continue across the change of rank count.
run two_partial 2 "${BASE[@]}" --epochs 2 --max-steps 11 --checkpoint-dir "$WORK/ck_partial"
[ -d "$WORK/ck_partial/epoch-0001-step-00000011" ] || fail "no checkpoint inside epoch 2: $(ls "$WORK/ck_partial")"
run partial_then_3 3 --resume "$WORK/ck_partial" --max-steps -1
compare one partial_then_3 "$EXACT" "$CLOSE"

# fp16 with a scaler that grows after every clean step, so steps overflow and are skipped.
FP16=("${BASE[@]}" --precision fp16 --scaler-growth-interval 1)
run one16 1 "${FP16[@]}" --epochs 2
run two16_first 2 "${FP16[@]}" --epochs 1 --checkpoint-dir "$WORK/ck16"
run two16_then_3 3 --resume "$WORK/ck16" --epochs 2
compare one16 two16_then_3 "epoch,optimizer_steps,skipped_steps,loss_scale,train_samples" ""
python3 -c "
import json, sys
n = sum(r['skipped_steps'] for r in map(json.loads, open('$WORK/one16.jsonl')) if r['type'] == 'epoch')
print('ok   fp16 skipped', n, 'steps') if n > 0 else print('FAIL fp16 skipped no step')
sys.exit(0 if n > 0 else 1)" || failures=$((failures + 1))

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failure(s)"; exit 1; }
