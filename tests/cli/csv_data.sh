#!/usr/bin/env bash
# Your own data from the CLI (issue 15, item 4): `mixprec train --data csv:PATH` on Fisher's iris
# (classification) and on a table with a known nonlinear relation (regression), standardisation
# from the training rows only (checked against statistics computed here, independently), resume,
# eval and predict agreeing with each other, `--data idx:DIR` on MNIST-named copies of the
# Fashion-MNIST files, and every kind of bad input: one clear line, non-zero exit, and no
# checkpoint or log left behind.
source "$(dirname "$0")/common.sh"
IRIS="$(cd "$(dirname "$0")/../data" && pwd)/iris.csv"
[ -f "$IRIS" ] || { echo "FAIL: $IRIS is missing"; exit 1; }
command -v python3 > /dev/null || { echo "FAIL: python3 (standard library only) is needed"; exit 1; }
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
# A python3 one-off (standard library only) whose non-zero exit is a failure named $1.
check_py() {
  local name="$1"
  shift
  local out
  if out="$(python3 - "$@" 2>&1)"; then echo "ok   $name: $out"; else fail "$name: $out"; fi
}
COMMON=(--model mlp --threads 1 --no-progress --seed 1)
IRIS_RUN=("${COMMON[@]}" --data "csv:$IRIS" --target species --batch-size 16 --lr 0.01)

# --- classification on iris: 30 held-out rows (the default --val-fraction 0.2 of 150) ---
if ! "$MIXPREC" train "${IRIS_RUN[@]}" --epochs 20 --checkpoint-dir "$WORK/iris" --keep-checkpoints 0 \
     --log "$WORK/iris.jsonl" > "$WORK/iris.out" 2>&1; then
  echo "FAIL train iris: $(cat "$WORK/iris.out")"; exit 1
fi
check_py "iris accuracy and the log header" "$WORK/iris.jsonl" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
head, last = lines[0], lines[-1]
d = head["data"]
assert d["source"] == "csv" and d["train_samples"] == 120 and d["test_samples"] == 30, d
assert d["val_fraction"] == 0.2 and d["classes"] == 3 and d["features"] == 4, d
assert head["config"]["inputs"] == 4 and head["config"]["outputs"] == 3, head["config"]
assert head["model"]["parameters"] == 4 * 256 + 256 + 256 * 128 + 128 + 128 * 3 + 3, head["model"]
assert last["test_accuracy"] >= 0.9, last
print("test accuracy %.4f after %d epochs" % (last["test_accuracy"], last["epoch"]))
EOF

# --- standardisation: the stored statistics are the training rows' (replayed here) ---
check_py "standardisation from the training rows only" "$IRIS" "$WORK/iris/epoch-0020/state.json" "$WORK/val.csv" <<'EOF'
import csv, json, math, sys
M = (1 << 64) - 1
def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)
rows = list(csv.reader(open(sys.argv[1])))
header, rows = rows[0], rows[1:]
n, seed, fraction = len(rows), 1, 0.2
base = splitmix64(seed)
m = min(max(int(fraction * n + 0.5), 1), n - 1)
held = set(sorted(range(n), key=lambda i: (splitmix64(base ^ i), i))[:m])
train = [r for i, r in enumerate(rows) if i not in held]
schema = json.load(open(sys.argv[2]))["data_schema"]
assert schema["features"] == header[:4] and schema["target"] == "species", schema
assert schema["num_classes"] == 3 and schema["task"] == "classification", schema
moved = 0
for j in range(4):
    xs = [float(r[j]) for r in train]
    mean = sum(xs) / len(xs)
    std = math.sqrt(sum((x - mean) ** 2 for x in xs) / len(xs))
    assert abs(schema["mean"][j] - mean) <= 1e-5 * abs(mean), (j, schema["mean"][j], mean)
    assert abs(schema["stddev"][j] - std) <= 1e-5 * std, (j, schema["stddev"][j], std)
    everything = sum(float(r[j]) for r in rows) / n
    moved += abs(everything - mean) > 1e-4
assert moved > 0, "the held-out rows do not move any mean: the check would not see a leak"
with open(sys.argv[3], "w") as f:  # the held-out rows, for predict below
    f.write(",".join(header) + "\n")
    for i in sorted(held):
        f.write(",".join(rows[i]) + "\n")
print("means and stddevs of the %d training rows; %d of 4 features would differ with all rows" % (len(train), moved))
EOF

# --- eval and predict agree on the held-out rows; predict ignores the target, matches by name ---
"$MIXPREC" eval --checkpoint "$WORK/iris" --json > "$WORK/eval.json" 2> "$WORK/eval.err" ||
  fail "eval iris: $(cat "$WORK/eval.err")"
"$MIXPREC" predict --checkpoint "$WORK/iris" --input "$WORK/val.csv" --output "$WORK/pred.csv" 2> "$WORK/pred.err" ||
  fail "predict iris: $(cat "$WORK/pred.err")"
# Same rows, columns reordered and no target column.
python3 -c "
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
with open(sys.argv[2], 'w') as f:
    for r in rows: f.write(','.join([r[3], r[1], r[0], r[2]]) + '\n')
" "$WORK/val.csv" "$WORK/val_shuffled.csv"
"$MIXPREC" predict --checkpoint "$WORK/iris" --input "$WORK/val_shuffled.csv" > "$WORK/pred_stdout.csv" 2>&1 ||
  fail "predict on reordered columns: $(cat "$WORK/pred_stdout.csv")"
ls "$WORK" | grep -q '\.tmp' && fail "predict left a temporary file: $(ls "$WORK")"
check_py "eval and predict agree" "$WORK/eval.json" "$WORK/val.csv" "$WORK/pred.csv" "$WORK/pred_stdout.csv" "$WORK/iris.jsonl" <<'EOF'
import csv, json, sys
ev = json.load(open(sys.argv[1]))
truth = [int(r["species"]) for r in csv.DictReader(open(sys.argv[2]))]
pred = list(csv.DictReader(open(sys.argv[3])))
assert list(pred[0].keys()) == ["prediction", "prob_0", "prob_1", "prob_2"], pred[0].keys()
assert len(pred) == len(truth) == ev["samples"] == 30, (len(pred), len(truth), ev["samples"])
right = sum(int(p["prediction"]) == t for p, t in zip(pred, truth))
assert right == round(ev["accuracy"] * ev["samples"]), (right, ev["accuracy"])
last = json.loads(open(sys.argv[5]).read().splitlines()[-1])
assert ev["accuracy"] == last["test_accuracy"], (ev["accuracy"], last["test_accuracy"])
for p in pred:
    probs = [float(p["prob_%d" % c]) for c in range(3)]
    assert abs(sum(probs) - 1) < 1e-6 and max(probs) == probs[int(p["prediction"])], p
assert open(sys.argv[3]).read() == open(sys.argv[4]).read(), "reordered columns changed the predictions"
print("%d of %d held-out rows right in both, as the log's last epoch" % (right, len(truth)))
EOF

# --- resume: 10 epochs, then 10 more, bit-identical to a 20-epoch run ---
# A constant learning rate: the cosine schedule spans the epochs asked for, so a 10-epoch run
# follows another schedule than a 20-epoch one.
"$MIXPREC" train "${IRIS_RUN[@]}" --scheduler none --epochs 20 --log "$WORK/full.jsonl" > "$WORK/full.out" 2>&1 ||
  fail "train 20 epochs: $(cat "$WORK/full.out")"
# On a copy of the file, which a bad-input case below changes under the checkpoint.
cp "$IRIS" "$WORK/iris_copy.csv"
"$MIXPREC" train "${IRIS_RUN[@]}" --scheduler none --data "csv:$WORK/iris_copy.csv" --epochs 10 \
  --checkpoint-dir "$WORK/iris_half" --log "$WORK/half.jsonl" \
  > "$WORK/half.out" 2>&1 || fail "train 10 epochs: $(cat "$WORK/half.out")"
"$MIXPREC" train --resume "$WORK/iris_half" --epochs 20 --no-progress --log "$WORK/half.jsonl" \
  > "$WORK/resume.out" 2>&1 || fail "resume: $(cat "$WORK/resume.out")"
check_py "resume matches the uninterrupted run" "$WORK/full.jsonl" "$WORK/half.jsonl" <<'EOF'
import json, sys
keys = ("train_loss", "test_loss", "test_accuracy", "macro_f1", "grad_norm_mean", "lr")
def epochs(p):
    return [{k: e[k] for k in keys} for e in map(json.loads, open(p)) if e.get("type") == "epoch"]
a, b = epochs(sys.argv[1]), epochs(sys.argv[2])
assert len(a) == len(b) == 20, (len(a), len(b))
assert a == b, next((i + 1, x, y) for i, (x, y) in enumerate(zip(a, b)) if x != y)
print("20 epochs, every metric identical")
EOF

# --- --test-data: the statistics are exactly the training file's (awk) ---
head -n 1 "$IRIS" > "$WORK/train_part.csv"; head -n 1 "$IRIS" > "$WORK/test_part.csv"
awk -F, 'NR > 1 && NR % 3 != 0' "$IRIS" >> "$WORK/train_part.csv"
# The test rows are shifted far away: a leak into the statistics would move the means a lot.
awk -F, 'BEGIN { OFS = "," } NR > 1 && NR % 3 == 0 { $1 += 50; print }' "$IRIS" >> "$WORK/test_part.csv"
"$MIXPREC" train "${IRIS_RUN[@]}" --data "csv:$WORK/train_part.csv" --test-data "csv:$WORK/test_part.csv" \
  --epochs 1 --checkpoint-dir "$WORK/split" > "$WORK/split.out" 2>&1 || fail "--test-data: $(cat "$WORK/split.out")"
awk_mean="$(awk -F, 'NR > 1 { s += $1; n++ } END { printf "%.9g", s / n }' "$WORK/train_part.csv")"
check_py "--test-data: mean of the training file ($awk_mean)" "$WORK/split/epoch-0001/state.json" "$awk_mean" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))["data_schema"]
want = float(sys.argv[2])
assert abs(s["mean"][0] - want) <= 1e-5 * want, (s["mean"][0], want)
print("stored mean[0] %.7g" % s["mean"][0])
EOF

# --- regression: y = 3a - 2b + 2 sin(c) + ab + 100 + noise ---
awk 'BEGIN { srand(7); print "a,b,c,y"
  for (i = 0; i < 2000; i++) { a = rand() * 4 - 2; b = rand() * 4 - 2; c = rand() * 6 - 3
    printf "%.5f,%.5f,%.5f,%.5f\n", a, b, c, 3 * a - 2 * b + 2 * sin(c) + a * b + 100 + (rand() - 0.5) * 0.2 } }' \
  > "$WORK/reg.csv"
"$MIXPREC" train "${COMMON[@]}" --data "csv:$WORK/reg.csv" --target y --task regression --epochs 10 \
  --batch-size 32 --lr 0.003 --checkpoint-dir "$WORK/reg" --log "$WORK/reg.jsonl" > "$WORK/reg.out" 2>&1 ||
  fail "regression: $(cat "$WORK/reg.out")"
grep -q "R2" "$WORK/reg.out" || fail "regression output lacks R2: $(cat "$WORK/reg.out")"
"$MIXPREC" eval --checkpoint "$WORK/reg" --json > "$WORK/reg_eval.json" 2>&1 || fail "eval regression: $(cat "$WORK/reg_eval.json")"
"$MIXPREC" predict --checkpoint "$WORK/reg" --input "$WORK/reg.csv" --output "$WORK/reg_pred.csv" 2> "$WORK/reg_pred.err" ||
  fail "predict regression: $(cat "$WORK/reg_pred.err")"
check_py "regression R² and predict" "$WORK/reg.jsonl" "$WORK/reg_eval.json" "$WORK/reg.csv" "$WORK/reg_pred.csv" <<'EOF'
import csv, json, sys
last = json.loads(open(sys.argv[1]).read().splitlines()[-1])
ev = json.load(open(sys.argv[2]))
assert last["test_r2"] >= 0.98, last
assert ev["r2"] == last["test_r2"] and ev["mse"] == last["test_mse"], (ev, last)
y = [float(r["y"]) for r in csv.DictReader(open(sys.argv[3]))]
p = [float(r["prediction"]) for r in csv.DictReader(open(sys.argv[4]))]
assert len(p) == len(y) == 2000
mean = sum(y) / len(y)
r2 = 1 - sum((a - b) ** 2 for a, b in zip(y, p)) / sum((a - mean) ** 2 for a in y)
assert r2 >= 0.98, r2
print("validation R2 %.4f (MSE %.4g); predict over all 2000 rows R2 %.4f" % (last["test_r2"], last["test_mse"], r2))
EOF

# --- idx:DIR: the Fashion-MNIST files under MNIST's names, train gzipped, t10k raw ---
if [ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$WORK/mnist"
  ln -s "$DATA_DIR/train-images-idx3-ubyte.gz" "$WORK/mnist/train-images-idx3-ubyte.gz"
  ln -s "$DATA_DIR/train-labels-idx1-ubyte.gz" "$WORK/mnist/train-labels-idx1-ubyte.gz"
  gzip -dc "$DATA_DIR/t10k-images-idx3-ubyte.gz" > "$WORK/mnist/t10k-images-idx3-ubyte"
  gzip -dc "$DATA_DIR/t10k-labels-idx1-ubyte.gz" > "$WORK/mnist/t10k-labels-idx1-ubyte"
  "$MIXPREC" train "${COMMON[@]}" --data "idx:$WORK/mnist" --limit-train 6000 --limit-test 1000 --epochs 1 \
    --checkpoint-dir "$WORK/idx" --log "$WORK/idx.jsonl" > "$WORK/idx.out" 2>&1 || fail "idx: $(cat "$WORK/idx.out")"
  "$MIXPREC" eval --checkpoint "$WORK/idx" --json > "$WORK/idx_eval.json" 2>&1 || fail "eval idx: $(cat "$WORK/idx_eval.json")"
  check_py "idx:DIR" "$WORK/idx.jsonl" "$WORK/idx_eval.json" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
d, last, ev = lines[0]["data"], lines[-1], json.load(open(sys.argv[2]))
assert d["source"] == "idx" and (d["image_rows"], d["image_cols"], d["classes"]) == (28, 28, 10), d
assert last["test_accuracy"] >= 0.7 and ev["accuracy"] == last["test_accuracy"], (last, ev)
print("28x28, 10 classes from the files; test accuracy %.4f (eval agrees)" % last["test_accuracy"])
EOF
  expect_failure idx_missing_files "iris/train-images-idx3-ubyte.gz: the file is missing" "$MIXPREC" train "${COMMON[@]}" --data "idx:$WORK/iris"
else
  fail "idx: $DATA_DIR is missing (scripts/install-deps.sh installs dataset-fashion-mnist)"
fi

# --- bad input: one line naming the file/line/column or flag, and nothing written ---
expect_clean_failure() {
  local name="$1" pattern="$2"
  shift 2
  expect_failure "$name" "$pattern" "$@" --checkpoint-dir "$WORK/bad_ckpt" --log "$WORK/bad.jsonl"
  if [ -e "$WORK/bad_ckpt" ] || [ -e "$WORK/bad.jsonl" ]; then
    fail "$name left $(ls -d "$WORK"/bad_ckpt "$WORK"/bad.jsonl 2>/dev/null | tr '\n' ' ')"
    rm -rf "$WORK/bad_ckpt" "$WORK/bad.jsonl"
  fi
}
B=("${COMMON[@]}" --target y)
printf 'a,b,y\n1,2,0\n3,4\n' > "$WORK/ragged.csv"
printf 'a,b,y\n1,2,0\n3,x,1\n' > "$WORK/text_cell.csv"
printf 'a,b,y\n1,2,0\n3,nan,1\n' > "$WORK/nan.csv"
printf 'a,b,y\n1,2,0\n3,-inf,1\n' > "$WORK/inf.csv"
printf 'a,b,y\n1,2,1\n3,4,1\n5,6,1\n' > "$WORK/one_class.csv"
printf 'a,b,y\n1,2,0.5\n3,4,cat\n' > "$WORK/word_target.csv"
: > "$WORK/empty.csv"
# 2,000,000 fields on the header line: refused after counting, before any per-column storage.
head -c 2000000 /dev/zero | tr '\0' ',' > "$WORK/wide.csv"
expect_clean_failure missing_target "no column named 'nope'" "$MIXPREC" train "${COMMON[@]}" --data "csv:$IRIS" --target nope
expect_clean_failure ragged_rows "ragged.csv: line 3 has 2 fields, expected 3" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/ragged.csv"
expect_clean_failure non_numeric "text_cell.csv: line 3, column 2 ('b'): 'x' is not a number" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/text_cell.csv"
expect_clean_failure nan_cell "nan.csv: line 3, column 2 ('b'): 'nan' is NaN" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/nan.csv"
expect_clean_failure inf_cell "inf.csv: line 3, column 2 ('b'): '-inf' is infinite" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/inf.csv"
expect_clean_failure single_class "one_class.csv: the target column 'y' holds a single class" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/one_class.csv"
expect_clean_failure too_many_columns "wide.csv: line 1 has 2000001 fields, more than the 1000000" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/wide.csv"
expect_clean_failure empty_file "empty.csv: the file is empty" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/empty.csv"
expect_clean_failure missing_file "nope.csv: the file is missing" "$MIXPREC" train "${B[@]}" --data "csv:$WORK/nope.csv"
expect_clean_failure target_without_csv "--target 'y' names a column of a table" "$MIXPREC" train "${B[@]}"
expect_clean_failure test_data_without_csv "--test-data" "$MIXPREC" train "${COMMON[@]}" --test-data "csv:$IRIS"
expect_clean_failure regression_word_target "word_target.csv: line 3, column 3 ('y'): target 'cat' is not a number" \
  "$MIXPREC" train "${B[@]}" --task regression --data "csv:$WORK/word_target.csv"
expect_clean_failure regression_without_csv "--task regression needs a table" "$MIXPREC" train "${COMMON[@]}" --task regression
expect_clean_failure unknown_task "--task must be classification or regression" "$MIXPREC" train "${IRIS_RUN[@]}" --task clustering
expect_clean_failure val_fraction_zero "--val-fraction must be in (0, 1), got 0" "$MIXPREC" train "${IRIS_RUN[@]}" --val-fraction 0
expect_clean_failure val_fraction_one "--val-fraction must be in (0, 1), got 1" "$MIXPREC" train "${IRIS_RUN[@]}" --val-fraction 1
expect_clean_failure val_fraction_negative "--val-fraction must be in (0, 1), got -0.2" "$MIXPREC" train "${IRIS_RUN[@]}" --val-fraction -0.2
expect_clean_failure fixed_shape_model "needs a model whose input and output widths follow the table" \
  "$MIXPREC" train --model cnn --threads 1 --no-progress --data "csv:$IRIS" --target species
cut -d, -f1-3,5 "$IRIS" > "$WORK/test_bad.csv"
expect_clean_failure test_data_missing_column "test_bad.csv: no column named 'petal_width'" \
  "$MIXPREC" train "${IRIS_RUN[@]}" --test-data "csv:$WORK/test_bad.csv"
# The training file changed under a checkpoint: resume and eval refuse rather than mis-scale.
sed -i 's/^5.1,3.5/9.9,3.5/' "$WORK/iris_copy.csv"
expect_failure resume_changed_data "its mean differs (was the data file changed" \
  "$MIXPREC" train --resume "$WORK/iris_half" --epochs 30 --no-progress
expect_failure eval_changed_data "its mean differs" "$MIXPREC" eval --checkpoint "$WORK/iris_half"
cut -d, -f1-3 "$IRIS" > "$WORK/predict_bad.csv"
expect_failure predict_missing_column "predict_bad.csv: no column named 'petal_width', a feature the model was trained on" \
  "$MIXPREC" predict --checkpoint "$WORK/iris" --input "$WORK/predict_bad.csv" --output "$WORK/bad_pred.csv"
[ -e "$WORK/bad_pred.csv" ] && fail "predict_missing_column wrote $WORK/bad_pred.csv"
printf 'c,b,a\n1,2,3\n4,x,6\n' > "$WORK/predict_text.csv"
expect_failure predict_text_cell "predict_text.csv: line 3, column 2 ('b'): 'x' is not a number" \
  "$MIXPREC" predict --checkpoint "$WORK/reg" --input "$WORK/predict_text.csv"
expect_failure predict_not_tabular "not on a table" "$MIXPREC" predict --checkpoint "$WORK/idx" --input "$IRIS"
finish
