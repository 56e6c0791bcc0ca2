#!/usr/bin/env bash
# Hostile and oversized files (issue 16): IDX headers claiming 2^40 pixels, safetensors length
# prefixes of a gigabyte and bad layouts, checkpoint manifests naming files outside the
# checkpoint, links inside it. Each must be refused under `ulimit -v 2000000` (2 GB of virtual
# memory) with a one-line error naming the problem, a non-zero exit below 128, in under a
# second, and without writing anything.
source "$(dirname "$0")/common.sh"
command -v python3 > /dev/null || { echo "SKIP: no python3"; exit 77; }
[ -f "$DATA_DIR/train-images-idx3-ubyte.gz" ] || { echo "SKIP: no Fashion-MNIST in $DATA_DIR"; exit 77; }
MIXPREC="$(cd "$(dirname "$MIXPREC")" && pwd)/$(basename "$MIXPREC")"  # the commands run elsewhere
# Sanitizer builds reserve terabytes of shadow memory and cannot start under the limit.
(ulimit -v 2000000 && "$MIXPREC" --help > /dev/null 2>&1) ||
  { echo "SKIP: mixprec does not start under ulimit -v 2000000 (a sanitizer build?)"; exit 77; }
SMALL=(--model mlp --limit-train 64 --limit-test 64 --threads 1 --no-progress)
mkdir -p "$WORK/cwd"

# A listing of everything under $WORK (names, sizes, modification times): equal before and after
# means the command wrote nothing.
snapshot() { find "$WORK" -printf '%p %s %T@\n' | sort; }

# hostile NAME PATTERN CMD...: expect_failure's checks, run in $WORK/cwd under ulimit -v 2000000,
# plus the time limit and the unchanged snapshot.
hostile() {
  local name="$1" pattern="$2"
  shift 2
  local before after t0 t1 ms err status
  before="$(snapshot)"
  t0=$(date +%s%N)
  err="$(cd "$WORK/cwd" && ulimit -v 2000000 && "$@" 2>&1 >/dev/null)"
  status=$?
  t1=$(date +%s%N)
  ms=$(((t1 - t0) / 1000000))
  after="$(snapshot)"
  if ! refused "$name" "$pattern" "$status" "$err"; then
    :
  elif [ "$(wc -l <<<"$err")" -ne 1 ]; then
    echo "FAIL $name: not one line: $err"; failures=$((failures + 1))
  elif [ "$ms" -ge 1000 ]; then
    echo "FAIL $name: took $ms ms: $err"; failures=$((failures + 1))
  elif [ "$before" != "$after" ]; then
    echo "FAIL $name: wrote something: $(diff <(echo "$before") <(echo "$after") | head -n 4)"
    failures=$((failures + 1))
  else
    echo "ok   $name (${ms} ms): $(head -c 300 <<<"$err")"
  fi
}

# --- IDX: headers claiming 2^20 images of 1024x1024 = 2^40 pixels, raw and gzipped ---
idx_dir() {  # idx_dir DIR: valid labels and t10k files; the caller writes train-images
  mkdir -p "$1"
  cp "$DATA_DIR/train-labels-idx1-ubyte.gz" "$DATA_DIR/t10k-images-idx3-ubyte.gz" \
     "$DATA_DIR/t10k-labels-idx1-ubyte.gz" "$1/"
}
idx_images() {  # idx_images FILE COUNT ROWS COLS: an images header followed by 64 bytes
  python3 -c 'import struct, sys
sys.stdout.buffer.write(struct.pack(">IIII", 0x803, *map(int, sys.argv[1:4])) + bytes(64))' "$2" "$3" "$4" > "$1"
}
idx_dir "$WORK/tera_raw" && idx_images "$WORK/tera_raw/train-images-idx3-ubyte" 1048576 1024 1024
hostile idx_2p40_raw "absurd header: 1048576 images of 1024x1024 are 1099511627776 pixel bytes" \
  "$MIXPREC" train "${SMALL[@]}" --data "idx:$WORK/tera_raw"
idx_dir "$WORK/tera_gz" && idx_images "$WORK/tera_gz/train-images-idx3-ubyte" 1048576 1024 1024
gzip "$WORK/tera_gz/train-images-idx3-ubyte"
hostile idx_2p40_gzip "train-images-idx3-ubyte.gz: absurd header" \
  "$MIXPREC" train "${SMALL[@]}" --data-dir "$WORK/tera_gz"
# Under the pixel cap but far beyond what the uncompressed file holds: refused by its size.
idx_dir "$WORK/short_raw" && idx_images "$WORK/short_raw/train-images-idx3-ubyte" 1000000 28 28
hostile idx_claims_784MB_holds_64B "expected 784000000 data bytes, got 64" \
  "$MIXPREC" train "${SMALL[@]}" --data "idx:$WORK/short_raw"

# --- A real checkpoint to tamper with ---
"$MIXPREC" train "${SMALL[@]}" --epochs 1 --checkpoint-dir "$WORK/ckpt" > /dev/null 2>&1 || {
  echo "FAIL: could not train the reference checkpoint"; exit 1; }
good="$WORK/ckpt/epoch-0001"
[ -f "$good/MANIFEST.json" ] || { echo "FAIL: no checkpoint written"; exit 1; }

# relist DIR NAME [FILE]: lists NAME in DIR's manifest with FILE's SHA-256 and size (FILE
# defaults to DIR/NAME), as a tamperer would, so loading gets past the integrity check.
relist() {
  python3 - "$1" "$2" "${3:-$1/$2}" <<'EOF'
import hashlib, json, sys
d, name, src = sys.argv[1:4]
with open(d + "/MANIFEST.json") as f:
    m = json.load(f)
data = open(src, "rb").read()
m["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
with open(d + "/MANIFEST.json", "w") as f:
    json.dump(m, f)
EOF
}
# tampered NAME: a fresh copy of the good checkpoint at $WORK/NAME (printed).
tampered() { rm -rf "$WORK/$1"; cp -r "$good" "$WORK/$1"; echo "$WORK/$1"; }
# st_file DIR PREFIX HEADER DATA_LEN: DIR/model.safetensors = the 8-byte length PREFIX (or
# "auto": HEADER's length), HEADER, DATA_LEN zero bytes; the manifest is relisted.
st_file() {
  python3 - "$1/model.safetensors" "$2" "$3" "$4" <<'EOF'
import struct, sys
path, prefix, header, n = sys.argv[1], sys.argv[2], sys.argv[3].encode(), int(sys.argv[4])
length = len(header) if prefix == "auto" else int(prefix)
open(path, "wb").write(struct.pack("<Q", length) + header + bytes(n))
EOF
  relist "$1" model.safetensors
}
F32='"dtype":"F32","shape":[2]'

# --- safetensors inside a checkpoint ---
d=$(tampered st_1gb_header) && st_file "$d" 1000000000 '{}' 0
hostile st_header_1e9 "header length 1000000000 exceeds the limit" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_2p63_header) && st_file "$d" 9223372036854775808 '{}' 0
hostile st_header_2p63 "header length 9223372036854775808 exceeds the limit" "$MIXPREC" train --resume "$d" --epochs 2 --no-progress
d=$(tampered st_past_end) && st_file "$d" 4096 '{}' 0
hostile st_header_past_end "header length 4096 runs past the end of the file" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_overlap) && st_file "$d" auto "{\"a\":{$F32,\"data_offsets\":[0,8]},\"b\":{$F32,\"data_offsets\":[0,8]}}" 8
hostile st_overlap "data_offsets \[0, 8\] overlap those of tensor" "$MIXPREC" train --resume "$d" --epochs 2 --no-progress
d=$(tampered st_gap) && st_file "$d" auto "{\"a\":{$F32,\"data_offsets\":[0,8]},\"b\":{$F32,\"data_offsets\":[12,20]}}" 20
hostile st_gap "bytes \[8, 12\] belong to no tensor" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_outside) && st_file "$d" auto "{\"a\":{$F32,\"data_offsets\":[0,8]},\"b\":{$F32,\"data_offsets\":[8,16]}}" 8
hostile st_offsets_outside "run past the 8-byte data buffer" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_dtype) && st_file "$d" auto '{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}' 8
hostile st_shape_dtype_mismatch "shape \[3\] of F32 needs 12 bytes but data_offsets \[0, 8\] hold 8" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_dup) && st_file "$d" auto "{\"a\":{$F32,\"data_offsets\":[0,8]},\"a\":{$F32,\"data_offsets\":[0,8]}}" 8
hostile st_duplicate_name 'names "a" twice' "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_u64) && st_file "$d" auto '{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}' 8
hostile st_count_overflows_u64 "needs more than 2^64 bytes" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered st_i64) && st_file "$d" auto '{"a":{"dtype":"F8_E4M3","shape":[4294967296,2147483649],"data_offsets":[0,8]}}' 8
hostile st_count_overflows_i64 "needs 9223372041149743104 bytes" "$MIXPREC" eval --checkpoint "$d"

# --- checkpoint manifests naming files outside the checkpoint ---
echo "not yours" > "$WORK/secret"
for name in ../secret "$WORK/secret" sub/secret; do
  d=$(tampered manifest_path) && relist "$d" "$name" "$WORK/secret"
  hostile "manifest_names_${name//\//_}" "names '$name'.*refusing to read outside the checkpoint directory" \
    "$MIXPREC" train --resume "$d" --epochs 2 --no-progress
done

# --- links inside a checkpoint are never followed, pointing outside or inside ---
d=$(tampered link_out) && rm "$d/state.json" && ln -s "$WORK/secret" "$d/state.json" && relist "$d" state.json
hostile entry_link_outside "state.json is a symbolic link" "$MIXPREC" train --resume "$d" --epochs 2 --no-progress
d=$(tampered link_in) && rm "$d/state.json" && ln -s model.safetensors "$d/state.json" && relist "$d" state.json
hostile entry_link_inside "state.json is a symbolic link" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered link_manifest) && mv "$d/MANIFEST.json" "$WORK/elsewhere.json" && ln -s "$WORK/elsewhere.json" "$d/MANIFEST.json"
hostile manifest_is_a_link "MANIFEST.json is a symbolic link" "$MIXPREC" eval --checkpoint "$d"
d=$(tampered fifo) && rm "$d/state.json" && mkfifo "$d/state.json"
hostile entry_is_a_fifo "state.json is not a regular file" "$MIXPREC" eval --checkpoint "$d"
# A (sparse) 16 GiB file where the manifest lists a small one: refused by size before reading.
d=$(tampered sparse) && truncate -s 16G "$d/model.safetensors"
hostile entry_16GiB_sparse "model.safetensors is damaged (size mismatch: 17179869184 bytes" "$MIXPREC" eval --checkpoint "$d"
# A 3 GiB file the manifest lists as 3 GiB (any SHA-256: it is never reached): more than the
# 2 GB this process may map, named as such rather than "std::bad_alloc".
d=$(tampered huge_listed) && truncate -s 3G "$d/model.safetensors"
python3 - "$d/MANIFEST.json" <<'EOF'
import json, sys
m = json.load(open(sys.argv[1]))
m["files"]["model.safetensors"] = {"sha256": "0" * 64, "bytes": 3 << 30}
json.dump(m, open(sys.argv[1], "w"))
EOF
hostile entry_3GiB_listed "model.safetensors is 3221225472 bytes, more than this process can allocate" \
  "$MIXPREC" eval --checkpoint "$d"
d=$(tampered big_manifest) && truncate -s 16G "$d/MANIFEST.json"
hostile manifest_16GiB_sparse "MANIFEST.json is 17179869184 bytes" "$MIXPREC" eval --checkpoint "$d"

# The directory the user names may itself be a link: followed, as documented. A link inside a
# directory of checkpoints is not one of its checkpoints.
ln -s "$WORK/ckpt" "$WORK/ckpt-link"
"$MIXPREC" eval --checkpoint "$WORK/ckpt-link" > /dev/null 2>&1 ||
  { echo "FAIL named_dir_link: eval through a link the user named"; failures=$((failures + 1)); }
mkdir -p "$WORK/only-links" && ln -s "$good" "$WORK/only-links/epoch-0009"
hostile link_inside_checkpoint_dir "holds no complete checkpoint" "$MIXPREC" eval --checkpoint "$WORK/only-links"

finish
