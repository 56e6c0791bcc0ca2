#pragma once
/// Checkpoint directories: how a training state is stored, validated and found (what goes in is
/// the caller's business; files are opaque bytes here).
///
/// A checkpoint is a directory <checkpoint_dir>/<name>/ holding named files plus MANIFEST.json:
///
///   {"format": "mixprec.checkpoint", "version": 1, "created": "2024-05-01T12:34:56Z",
///    "files": {"model.safetensors": {"sha256": "<64 hex>", "bytes": N}, ...}}
///
/// MANIFEST.json is written last, so a directory without it is an incomplete checkpoint (a save
/// that did not finish) and is never loaded. save_checkpoint builds the checkpoint in a hidden
/// sibling ".tmp-<name>-<pid>" and renames it into place, so after a crash at any point the name
/// holds either the old checkpoint or the complete new one. Entries whose name starts with '.'
/// are never checkpoints; stale ".tmp-*" directories of processes that no longer run are removed
/// by the next save.
///
/// Order: checkpoints are ordered by name (byte-wise string comparison), so callers must use
/// names that sort chronologically, e.g. zero-padded "epoch-0003-step-000000468". "Newest" means
/// last in that order.
///
/// Saving the same name concurrently from two threads is not supported; different names are fine.
/// Every error is a ValueError whose message names the checkpoint path and the problem.
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace mixprec::io {

/// Name of the manifest file inside a checkpoint directory.
inline constexpr const char* kCheckpointManifest = "MANIFEST.json";
/// Value of the manifest's "format" field.
inline constexpr const char* kCheckpointFormat = "mixprec.checkpoint";
/// Manifest version written (and the newest read).
inline constexpr int kCheckpointVersion = 1;

/// The files of a checkpoint: file name -> contents.
struct CheckpointFiles {
  std::map<std::string, std::string> files;
  /// load_checkpoint: the text of the MANIFEST.json the files were verified against (it holds
  /// every file's SHA-256, so it identifies the checkpoint's contents); ignored by save_checkpoint.
  std::string manifest;
};

/// Writes files as checkpoint <checkpoint_dir>/<name> (creating checkpoint_dir if needed,
/// replacing an existing checkpoint of that name atomically) and returns that path. name and
/// every file name must be a plain file name (non-empty, no '/', not starting with '.'); a file
/// may not be called MANIFEST.json.
std::string save_checkpoint(const std::string& checkpoint_dir, const std::string& name,
                            const CheckpointFiles& files);

/// The checkpoint directory load_checkpoint(path) reads: path itself if it holds MANIFEST.json,
/// otherwise the newest complete checkpoint inside path (symbolic links inside path are not
/// checkpoints; path itself may be a link). ValueError if path is missing, not a directory, an
/// incomplete checkpoint, or holds no complete checkpoint.
std::string resolve_checkpoint(const std::string& path);

/// Loads and verifies the checkpoint resolve_checkpoint(path) names: the manifest must parse and
/// every file it lists must be present with the listed size and SHA-256 (files not listed are
/// ignored). Nothing outside the checkpoint directory is ever read: manifest names must be plain
/// file names, the manifest and every file must be regular files and are opened without
/// following links, and sizes are checked before anything is read. A damaged newest checkpoint is an error, not a reason to fall back silently to an
/// older one: pass the older checkpoint's own directory to load that instead.
CheckpointFiles load_checkpoint(const std::string& path);

/// Complete checkpoints (subdirectories, not links, holding MANIFEST.json) of checkpoint_dir, oldest first,
/// as full paths; empty if checkpoint_dir does not exist. Contents are not verified here.
std::vector<std::string> list_checkpoints(const std::string& checkpoint_dir);

/// Deletes all but the newest keep_last (>= 1) complete checkpoints of checkpoint_dir. Each is
/// first renamed to a hidden ".tmp-*" name, so an interrupted prune never leaves a
/// half-deleted checkpoint that still looks complete.
void prune_checkpoints(const std::string& checkpoint_dir, std::size_t keep_last);

}  // namespace mixprec::io
