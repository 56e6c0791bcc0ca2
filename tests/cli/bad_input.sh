#!/usr/bin/env bash
# Bad input to `mixprec train/eval/parity`: a clear one-line error and a non-zero exit, never a
# crash, and never a half-written checkpoint.
source "$(dirname "$0")/common.sh"
SMALL=(--model mlp --limit-train 256 --limit-test 100 --threads 1 --no-progress)

expect_failure batch_size_zero "batch-size" "$MIXPREC" train "${SMALL[@]}" --batch-size 0
expect_failure negative_lr "lr" "$MIXPREC" train "${SMALL[@]}" --lr=-0.1
expect_failure nan_lr "lr" "$MIXPREC" train "${SMALL[@]}" --lr nan
expect_failure unknown_loss_scaling "--loss-scaling" "$MIXPREC" train "${SMALL[@]}" --loss-scaling adaptive
expect_failure zero_growth_interval "--scaler-growth-interval" "$MIXPREC" train "${SMALL[@]}" --scaler-growth-interval 0
expect_failure unknown_model "unknown model 'resnet9000'" "$MIXPREC" train --model resnet9000
expect_failure unknown_precision "fp9" "$MIXPREC" train "${SMALL[@]}" --precision fp9
# fp8 recipes: a history of 0 steps, a negative margin, an unknown format, a model whose Linears
# are all first or last (cnn: FC 128, FC 10).
expect_failure fp8_history_zero "--fp8-amax-history" "$MIXPREC" train "${SMALL[@]}" --precision fp8-delayed --fp8-amax-history 0
expect_failure fp8_negative_margin "--fp8-margin" "$MIXPREC" train "${SMALL[@]}" --precision fp8 --fp8-margin=-1
expect_failure fp8_unknown_format "--fp8-format" "$MIXPREC" train "${SMALL[@]}" --precision fp8 --fp8-format e5m2
expect_failure fp8_no_middle_linear "at least 3" "$MIXPREC" train --model cnn --limit-train 256 --limit-test 100 --threads 1 --no-progress --precision fp8
# An fp8 layer policy naming a layer the model lacks: refused naming it and listing the Linears.
printf '%s' '{"format": "mixprec-layer-policy", "version": 1, "layers": {"layers.9": "fp8"}}' > "$WORK/fp8-policy.json"
expect_failure fp8_policy_unknown_layer "names layer 'layers.9', which is not a Linear of MLP (its Linears: layers.0" \
  "$MIXPREC" train "${SMALL[@]}" --precision fp8 --policy "$WORK/fp8-policy.json"
expect_failure unknown_optimizer "optimizer" "$MIXPREC" train "${SMALL[@]}" --optimizer lion
expect_failure absurd_epochs "epochs" "$MIXPREC" train "${SMALL[@]}" --epochs 0
expect_failure not_a_number "batch-size" "$MIXPREC" train "${SMALL[@]}" --batch-size abc
expect_failure missing_dataset "dataset-fashion-mnist" "$MIXPREC" train "${SMALL[@]}" --data-dir "$WORK/none"
expect_failure missing_dataset_flag "--data-dir" "$MIXPREC" train "${SMALL[@]}" --data-dir "$WORK/none"

# Damaged data files: truncated gzip, corrupt bytes, label count different from image count.
mkdir -p "$WORK/trunc" "$WORK/corrupt" "$WORK/mismatch"
cp "$DATA_DIR"/* "$WORK/trunc/" && cp "$DATA_DIR"/* "$WORK/corrupt/" && cp "$DATA_DIR"/* "$WORK/mismatch/"
head -c 100000 "$DATA_DIR/train-images-idx3-ubyte.gz" > "$WORK/trunc/train-images-idx3-ubyte.gz"
expect_failure truncated_gzip "train-images-idx3-ubyte" "$MIXPREC" train "${SMALL[@]}" --data-dir "$WORK/trunc"
printf 'garbage!' | dd of="$WORK/corrupt/train-labels-idx1-ubyte.gz" bs=1 seek=20 conv=notrunc 2>/dev/null
expect_failure corrupt_gzip "train-labels-idx1-ubyte" "$MIXPREC" train "${SMALL[@]}" --data-dir "$WORK/corrupt"
cp "$DATA_DIR/t10k-labels-idx1-ubyte.gz" "$WORK/mismatch/train-labels-idx1-ubyte.gz"
expect_failure label_count "labels" "$MIXPREC" train --model mlp --threads 1 --no-progress --data-dir "$WORK/mismatch"

# Checkpoints: a good one, then damaged copies of it.
"$MIXPREC" train "${SMALL[@]}" --epochs 1 --checkpoint-dir "$WORK/ckpt" > /dev/null || {
  echo "FAIL: could not train the reference checkpoint"; exit 1; }
good="$WORK/ckpt/epoch-0001"
[ -f "$good/MANIFEST.json" ] || { echo "FAIL: no checkpoint written"; exit 1; }
"$MIXPREC" eval --checkpoint "$WORK/ckpt" > /dev/null || { echo "FAIL: eval of a good checkpoint"; failures=$((failures + 1)); }

cp -r "$good" "$WORK/tampered"
size=$(stat -c %s "$WORK/tampered/model.safetensors")
printf '\x01' | dd of="$WORK/tampered/model.safetensors" bs=1 seek=$((size - 7)) conv=notrunc 2>/dev/null
expect_failure tampered_checkpoint "sha256" "$MIXPREC" eval --checkpoint "$WORK/tampered"
cp -r "$good" "$WORK/truncated"
truncate -s $((size / 2)) "$WORK/truncated/model.safetensors"
expect_failure truncated_checkpoint "model.safetensors" "$MIXPREC" eval --checkpoint "$WORK/truncated"
cp -r "$good" "$WORK/nomanifest" && rm "$WORK/nomanifest/MANIFEST.json"
expect_failure incomplete_checkpoint "MANIFEST" "$MIXPREC" eval --checkpoint "$WORK/nomanifest"
expect_failure missing_checkpoint "no-such" "$MIXPREC" eval --checkpoint "$WORK/no-such"
expect_failure other_model "model" "$MIXPREC" train --resume "$WORK/ckpt" --model cnn --epochs 2 --no-progress
expect_failure other_loss_scaling "loss_scaling" "$MIXPREC" train --resume "$WORK/ckpt" --loss-scaling predictive --epochs 2 --no-progress
expect_failure already_done "epochs" "$MIXPREC" train --resume "$WORK/ckpt" --epochs 1 --no-progress

# An unwritable checkpoint directory fails before or at the first save, and leaves nothing half-written.
touch "$WORK/a-file"
expect_failure unwritable_checkpoint_dir "a-file" "$MIXPREC" train "${SMALL[@]}" --checkpoint-dir "$WORK/a-file/ckpt"
expect_failure parity_one_mode "precisions" "$MIXPREC" parity "${SMALL[@]}" --precisions fp32
expect_failure parity_bad_mode "fp9" "$MIXPREC" parity "${SMALL[@]}" --precisions fp32,fp9

# The diagnostic commands.
expect_failure bench_zero_steps "steps" "$MIXPREC" bench --model mlp --precision fp32 --steps 0
expect_failure bench_unknown_model "unknown model" "$MIXPREC" bench --model vgg --steps 2
expect_failure image_size_too_small "--image-size must be in .32, 4096." "$MIXPREC" bench --model resnet50 --image-size 16 --steps 1
expect_failure memory_format_unknown "use contiguous or channels-last" "$MIXPREC" bench --model cnn --memory-format nhwc --steps 1
expect_failure memory_format_not_images "--memory-format applies to image models" "$MIXPREC" train "${SMALL[@]}" --memory-format channels-last
expect_failure image_size_fixed_model "--image-size is for models that take any" "$MIXPREC" train "${SMALL[@]}" --image-size 64
expect_failure profile_unknown_model "unknown model" "$MIXPREC" profile --model vgg --steps 2
expect_failure profile_zero_steps "steps" "$MIXPREC" profile --model mlp --steps 0
expect_failure profile_negative_warmup "warmup" "$MIXPREC" profile --model mlp --steps 2 --warmup -1
expect_failure profile_bad_precision "fp9" "$MIXPREC" profile --model mlp --steps 2 --precision fp9
expect_failure formats_bad_range "range" "$MIXPREC" formats --range 3:3
expect_failure formats_unwritable_svg "$WORK/a-file/plot.svg" "$MIXPREC" formats --svg "$WORK/a-file/plot.svg"
expect_failure inspect_unknown_model "unknown model" "$MIXPREC" inspect --model vgg --steps 2
expect_failure inspect_zero_steps "steps" "$MIXPREC" inspect --model mlp --precision bf16 --steps 0
expect_failure inspect_bad_precision "fp9" "$MIXPREC" inspect --model mlp --precision fp9 --steps 1
expect_failure inspect_unwritable_svg "$WORK/a-file/layers.svg" "$MIXPREC" inspect --model mlp --steps 1 --svg "$WORK/a-file/layers.svg"
expect_failure inspect_missing_dataset "dataset-fashion-mnist" "$MIXPREC" inspect --model mlp --steps 1 --data-dir "$WORK/none"

# Two runs writing checkpoints into one directory: the second is refused, naming the first.
"$MIXPREC" train --model mlp --precision fp32 --epochs 50 --limit-train 2560 --limit-test 100 --threads 1 \
  --no-progress --checkpoint-dir "$WORK/shared" > /dev/null 2>&1 &
first=$!
for _ in $(seq 100); do grep -q "pid $first" "$WORK/shared/.mixprec-lock" 2> /dev/null && break; sleep 0.1; done
expect_failure checkpoint_dir_in_use "is in use by mixprec train (pid $first on host" \
  "$MIXPREC" train --model mlp --precision fp32 --epochs 1 --limit-train 256 --threads 1 --checkpoint-dir "$WORK/shared"
kill "$first"; wait "$first" 2> /dev/null
finish
