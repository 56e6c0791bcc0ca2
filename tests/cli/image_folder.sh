#!/usr/bin/env bash
# --data images:DIR from the CLI (issue 36, deliverable 4): ResNet-50 trains two steps at 32
# pixels on a folder written by make_image_folder (the train/ and val/ layout, then class
# folders alone with --val-fraction), an evaluation finds the same classes, and bad folders are
# refused with one clear line naming the folder or file. $2 is the folder generator.
source "$(dirname "$0")/common.sh"
MAKE_FOLDER="$2"
fail() { echo "FAIL $1"; failures=$((failures + 1)); }
"$MAKE_FOLDER" "$WORK/pets" || { echo "FAIL: $MAKE_FOLDER $WORK/pets"; exit 1; }
"$MAKE_FOLDER" "$WORK/flat" --flat || { echo "FAIL: $MAKE_FOLDER $WORK/flat --flat"; exit 1; }
# fp32 and plain SGD: the cheapest step of resnet50 (2 cores, about 3 s a step at 32 pixels).
RUN=(--model resnet50 --image-size 32 --batch-size 2 --max-steps 2 --threads 2 --data-workers 2 --no-progress
     --seed 3 --precision fp32 --optimizer sgd)

# --- the train/ and val/ layout: 12 training and 3 validation images of 3 classes ---
if ! "$MIXPREC" train "${RUN[@]}" --data "images:$WORK/pets" --log "$WORK/pets.jsonl" \
     --checkpoint-dir "$WORK/ckpt" > "$WORK/pets.out" 2>&1; then
  echo "FAIL train on images: $(cat "$WORK/pets.out")"; exit 1
fi
head -n 1 "$WORK/pets.jsonl" > "$WORK/pets.head"
check "log: source images" '"source":"images"' "$WORK/pets.head"
check "log: 3 classes" '"classes":3' "$WORK/pets.head"
check "log: 12 training images" '"train_samples":12' "$WORK/pets.head"
check "log: 3 validation images" '"test_samples":3' "$WORK/pets.head"
check "log: the folders' split" '"split":"train/ and val/ folders"' "$WORK/pets.head"
check "log: an evaluated epoch" '"test_accuracy"' "$WORK/pets.jsonl"

# mixprec eval reads the folder again and must find the same classes; with a class renamed it
# refuses, naming the field.
if ! "$MIXPREC" eval --checkpoint "$WORK/ckpt" > "$WORK/eval.out" 2>&1; then
  fail "eval on the same folder: $(cat "$WORK/eval.out")"
else
  echo "ok   eval on the same folder"
fi
mv "$WORK/pets/train/fish" "$WORK/pets/train/bird" && mv "$WORK/pets/val/fish" "$WORK/pets/val/bird"
expect_failure eval_other_classes "class_names_sha256" "$MIXPREC" eval --checkpoint "$WORK/ckpt"

# --- class folders alone: a quarter of the 12 images held out ---
if ! "$MIXPREC" train "${RUN[@]}" --data "images:$WORK/flat" --val-fraction 0.25 --data-workers 0 --max-steps 1 \
     --log "$WORK/flat.jsonl" > "$WORK/flat.out" 2>&1; then
  fail "train on class folders: $(cat "$WORK/flat.out")"
else
  head -n 1 "$WORK/flat.jsonl" > "$WORK/flat.head"
  check "flat: 9 training images" '"train_samples":9' "$WORK/flat.head"
  check "flat: 3 held out" '"test_samples":3' "$WORK/flat.head"
  check "flat: the fraction" '"val_fraction":0.25' "$WORK/flat.head"
fi

# --- bad folders and models ---
expect_failure images_missing_dir "no such folder" "$MIXPREC" train "${RUN[@]}" --data "images:$WORK/none"
expect_failure images_no_dir_named "images:DIR" "$MIXPREC" train "${RUN[@]}" --data "images:"
expect_failure images_flat_model "\[3, H, W\]" "$MIXPREC" train --model mlp --no-progress --data "images:$WORK/pets"
mkdir -p "$WORK/empty/cat" "$WORK/empty/dog"
cp "$WORK/flat/cat/img0.png" "$WORK/empty/cat/"
expect_failure images_empty_class "empty/dog holds no" "$MIXPREC" train "${RUN[@]}" --data "images:$WORK/empty"
# Every training image cut short: the first batch fails, naming a file, on a worker thread.
cp -r "$WORK/flat" "$WORK/corrupt"
for f in "$WORK"/corrupt/*/*; do head -c 60 "$WORK/flat/${f#"$WORK"/corrupt/}" > "$f"; done
expect_failure images_corrupt_file "corrupt/.*/img.*not a readable" \
  "$MIXPREC" train "${RUN[@]}" --data "images:$WORK/corrupt" --val-fraction 0.25
finish
