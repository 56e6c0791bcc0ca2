// Checkpoint directories: round trip and manifest contents; the newest complete checkpoint of a
// directory is found by name order; incomplete ones (no manifest) and hidden temporaries are
// skipped; tampering, truncation and missing files are detected by size and SHA-256; unusable
// locations and bad names give ValueError; saving under an existing name replaces it whole;
// stale temporaries of dead processes are cleaned; pruning keeps the newest.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "io/io_test_util.h"
#include "mixprec/core/error.h"
#include "mixprec/io/atomic_file.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/sha256.h"

namespace mixprec::io {
namespace {

namespace fs = std::filesystem;
using test::entries;
using test::TempDir;

CheckpointFiles sample(const std::string& tag) {
  CheckpointFiles f;
  f.files["model.safetensors"] = std::string("\0\x01\xffmodel-", 9) + tag + std::string(5000, 'm');
  f.files["trainer.json"] = "{\"tag\":\"" + tag + "\"}";
  f.files["empty.bin"] = "";
  return f;
}

// "YYYY-MM-DDTHH:MM:SSZ" (std::regex would do, but trips GCC 12 warnings under sanitizers).
bool is_iso_time(const std::string& s) {
  const std::string pattern = "dddd-dd-ddTdd:dd:ddZ";
  if (s.size() != pattern.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (pattern[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != pattern[i]) return false;
  }
  return true;
}

// Expects f() to throw ValueError whose message contains every one of parts.
template <class F>
void expect_value_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const ValueError& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << "want '" << p << "' in: " << e.what();
  }
}

TEST(IoCheckpoint, SaveLoadRoundTripAndManifest) {
  TempDir dir;
  const std::string path = save_checkpoint(dir / "ckpt", "epoch-0001-step-000000100", sample("a"));
  EXPECT_EQ(path, dir / "ckpt/epoch-0001-step-000000100");
  EXPECT_EQ(entries(path), (std::vector<std::string>{"MANIFEST.json", "empty.bin", "model.safetensors", "trainer.json"}));
  EXPECT_EQ(entries(dir / "ckpt"), std::vector<std::string>{"epoch-0001-step-000000100"});  // no temporaries
  EXPECT_EQ(load_checkpoint(path).files, sample("a").files);

  const auto m = nlohmann::json::parse(read_file(path + "/MANIFEST.json"));
  EXPECT_EQ(m["format"], "mixprec.checkpoint");
  EXPECT_EQ(m["version"], 1);
  EXPECT_TRUE(is_iso_time(m["created"].get<std::string>())) << m["created"];
  const std::string model = sample("a").files["model.safetensors"];
  EXPECT_EQ(m["files"]["model.safetensors"]["sha256"], sha256_hex(model));
  EXPECT_EQ(m["files"]["model.safetensors"]["bytes"], model.size());
  EXPECT_EQ(m["files"]["empty.bin"]["sha256"], "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(m["files"].size(), 3u);
}

TEST(IoCheckpoint, NewestCompleteOfDirectoryByNameOrder) {
  TempDir dir;
  const std::string ck = dir / "ck";
  save_checkpoint(ck, "epoch-0002", sample("2"));
  save_checkpoint(ck, "epoch-0010", sample("10"));  // zero-padded: sorts after 0002
  save_checkpoint(ck, "epoch-0001", sample("1"));   // saved last, but older by name
  // An interrupted save: files but no manifest. And a hidden temporary with a manifest.
  fs::create_directory(ck + "/epoch-0099");
  write_file_atomically(ck + "/epoch-0099/model.safetensors", "partial");
  fs::copy(ck + "/epoch-0010", ck + "/.tmp-epoch-0100-1", fs::copy_options::recursive);

  EXPECT_EQ(list_checkpoints(ck), (std::vector<std::string>{ck + "/epoch-0001", ck + "/epoch-0002", ck + "/epoch-0010"}));
  EXPECT_EQ(resolve_checkpoint(ck), ck + "/epoch-0010");
  EXPECT_EQ(resolve_checkpoint(ck + "/epoch-0002"), ck + "/epoch-0002");
  EXPECT_EQ(load_checkpoint(ck).files, sample("10").files);
  EXPECT_EQ(load_checkpoint(ck + "/epoch-0002").files, sample("2").files);
  expect_value_error([&] { (void)load_checkpoint(ck + "/epoch-0099"); },
                     {"load_checkpoint: checkpoint '" + ck + "/epoch-0099'", "incomplete checkpoint", "MANIFEST.json"});
  EXPECT_TRUE(list_checkpoints(dir / "does-not-exist").empty());
}

TEST(IoCheckpoint, NoCompleteCheckpointIsValueError) {
  TempDir dir;
  fs::create_directory(dir / "empty");
  expect_value_error([&] { (void)load_checkpoint(dir / "empty"); }, {"holds no complete checkpoint"});
  fs::create_directories(dir / "only-incomplete/epoch-0001");
  expect_value_error([&] { (void)load_checkpoint(dir / "only-incomplete"); },
                     {"holds no complete checkpoint", "skipped incomplete", "epoch-0001"});
  expect_value_error([&] { (void)load_checkpoint(dir / "missing"); }, {"'" + (dir / "missing") + "'", "no such file"});
  write_file_atomically(dir / "file", "x");
  expect_value_error([&] { (void)load_checkpoint(dir / "file"); }, {"is not a directory"});
}

TEST(IoCheckpoint, TamperedTruncatedOrMissingFilesAreDetected) {
  TempDir dir;
  const std::string path = save_checkpoint(dir.path().string(), "c", sample("x"));
  const std::string model = path + "/model.safetensors";
  const std::string good = read_file(model);

  std::string tampered = good;
  tampered[100] = static_cast<char>(tampered[100] ^ 0x01);  // one bit, same size
  write_file_atomically(model, tampered);
  expect_value_error([&] { (void)load_checkpoint(path); },
                     {"load_checkpoint: checkpoint '" + path + "': model.safetensors is damaged (sha256 mismatch"});

  write_file_atomically(model, good.substr(0, good.size() - 1));
  expect_value_error([&] { (void)load_checkpoint(path); }, {"model.safetensors is damaged (size mismatch", "truncated"});

  fs::remove(model);
  expect_value_error([&] { (void)load_checkpoint(path); }, {"model.safetensors is missing"});

  write_file_atomically(model, good);
  write_file_atomically(path + "/notes.txt", "extra files are ignored");
  EXPECT_EQ(load_checkpoint(path).files, sample("x").files);
}

TEST(IoCheckpoint, DamagedManifestIsValueError) {
  TempDir dir;
  const std::string path = save_checkpoint(dir.path().string(), "c", sample("x"));
  const std::string manifest = path + "/MANIFEST.json";
  const std::string good = read_file(manifest);
  write_file_atomically(manifest, good.substr(0, good.size() / 2));
  expect_value_error([&] { (void)load_checkpoint(path); }, {"MANIFEST.json is damaged", "not valid JSON"});
  auto m = nlohmann::json::parse(good);
  m["version"] = 2;
  write_file_atomically(manifest, m.dump());
  expect_value_error([&] { (void)load_checkpoint(path); }, {"manifest version 2 is not supported"});
  m = nlohmann::json::parse(good);
  m["format"] = "other";
  write_file_atomically(manifest, m.dump());
  expect_value_error([&] { (void)load_checkpoint(path); }, {"not a mixprec manifest"});
  m = nlohmann::json::parse(good);
  m["files"]["../escape"] = m["files"]["empty.bin"];
  write_file_atomically(manifest, m.dump());
  expect_value_error([&] { (void)load_checkpoint(path); }, {"names '../escape'", "not a plain file name"});
}

// Rewrites the manifest of checkpoint `path` so that it lists `name` with the SHA-256 and size
// of `bytes`, as a tamperer would to get past the integrity check.
void relist(const std::string& path, const std::string& name, const std::string& bytes) {
  auto m = nlohmann::json::parse(read_file(path + "/MANIFEST.json"));
  m["files"][name] = {{"sha256", sha256_hex(bytes)}, {"bytes", bytes.size()}};
  write_file_atomically(path + "/MANIFEST.json", m.dump());
}

// A manifest cannot make load_checkpoint read outside the checkpoint directory: names that are
// paths are refused before any file is opened.
TEST(IoCheckpoint, ManifestNamesOutsideTheDirectoryAreRefused) {
  TempDir dir;
  const std::string path = save_checkpoint(dir.path().string(), "c", sample("x"));
  const std::string secret = "the secret";
  write_file_atomically(dir / "outside", secret);
  const std::string good = read_file(path + "/MANIFEST.json");
  for (const std::string& name : {std::string("../outside"), dir / "outside", std::string("sub/x"),
                                  std::string(".hidden"), std::string("")}) {
    write_file_atomically(path + "/MANIFEST.json", good);
    relist(path, name, secret);
    expect_value_error([&] { (void)load_checkpoint(path); }, {"names '" + name + "'", "refusing to read outside"});
  }
}

// Links are never followed inside a checkpoint, whether they point outside or inside it; the
// manifest itself may not be a link; FIFOs are refused without blocking.
TEST(IoCheckpoint, LinksAndSpecialFilesInsideAreRefused) {
  TempDir dir;
  const std::string path = save_checkpoint(dir.path().string(), "c", sample("x"));
  const std::string good = read_file(path + "/MANIFEST.json");
  const std::string secret = "the secret";
  write_file_atomically(dir / "outside", secret);
  fs::remove(path + "/trainer.json");
  fs::create_symlink(dir / "outside", path + "/trainer.json");
  relist(path, "trainer.json", secret);
  expect_value_error([&] { (void)load_checkpoint(path); }, {"trainer.json is a symbolic link", "never follows"});

  fs::remove(path + "/trainer.json");
  fs::create_symlink("model.safetensors", path + "/trainer.json");  // inside: refused all the same
  relist(path, "trainer.json", read_file(path + "/model.safetensors"));
  expect_value_error([&] { (void)load_checkpoint(path); }, {"trainer.json is a symbolic link"});

  fs::remove(path + "/trainer.json");
  ASSERT_EQ(::mkfifo((path + "/trainer.json").c_str(), 0600), 0);
  relist(path, "trainer.json", "");
  expect_value_error([&] { (void)load_checkpoint(path); }, {"trainer.json is not a regular file"});

  write_file_atomically(dir / "manifest-elsewhere", good);
  fs::remove(path + "/MANIFEST.json");
  fs::create_symlink(dir / "manifest-elsewhere", path + "/MANIFEST.json");
  expect_value_error([&] { (void)load_checkpoint(path); }, {"MANIFEST.json is a symbolic link"});
}

// The size is checked before a file is read: a (sparse) 16 GiB file listed as 5 bytes is refused
// without allocating 16 GiB.
TEST(IoCheckpoint, SizeIsCheckedBeforeReading) {
  TempDir dir;
  const std::string path = save_checkpoint(dir.path().string(), "c", sample("x"));
  fs::resize_file(path + "/trainer.json", std::uint64_t{1} << 34);
  expect_value_error([&] { (void)load_checkpoint(path); },
                     {"trainer.json is damaged", "17179869184 bytes, the manifest says"});
  fs::resize_file(path + "/MANIFEST.json", std::uint64_t{1} << 34);
  expect_value_error([&] { (void)load_checkpoint(path); }, {"MANIFEST.json is 17179869184 bytes"});
}

// The directory the user names may be a link (it is followed); a checkpoint inside a directory of
// checkpoints that is a link is not a checkpoint of that directory.
TEST(IoCheckpoint, OnlyTheNamedDirectoryMayBeALink) {
  TempDir dir;
  const std::string real = save_checkpoint((dir.path() / "runs").string(), "epoch-1", sample("real"));
  fs::create_symlink(dir.path() / "runs", dir.path() / "link-to-runs");
  EXPECT_EQ(load_checkpoint(dir / "link-to-runs").files.at("trainer.json"), "{\"tag\":\"real\"}");
  fs::create_symlink(real, dir.path() / "link-to-ckpt");
  EXPECT_EQ(load_checkpoint(dir / "link-to-ckpt").files.at("trainer.json"), "{\"tag\":\"real\"}");
  // A link named to sort last inside runs/ is skipped: the real epoch-1 is still the newest.
  (void)save_checkpoint((dir.path() / "elsewhere").string(), "epoch-9", sample("elsewhere"));
  fs::create_symlink(dir.path() / "elsewhere" / "epoch-9", dir.path() / "runs" / "epoch-9");
  EXPECT_EQ(resolve_checkpoint((dir.path() / "runs").string()), real);
  EXPECT_EQ(list_checkpoints((dir.path() / "runs").string()), std::vector<std::string>{real});
}

// A damaged newest checkpoint is reported, not silently skipped in favour of an older one.
TEST(IoCheckpoint, DamagedNewestIsAnErrorNotAFallback) {
  TempDir dir;
  save_checkpoint(dir.path().string(), "a", sample("a"));
  const std::string b = save_checkpoint(dir.path().string(), "b", sample("b"));
  write_file_atomically(b + "/trainer.json", "{}");
  expect_value_error([&] { (void)load_checkpoint(dir.path().string()); }, {"'" + b + "'", "trainer.json is damaged"});
}

TEST(IoCheckpoint, ReplacingANameSwapsTheWholeDirectory) {
  TempDir dir;
  save_checkpoint(dir.path().string(), "c", sample("old"));
  CheckpointFiles fresh;
  fresh.files["only.bin"] = "new";
  const std::string path = save_checkpoint(dir.path().string(), "c", fresh);
  EXPECT_EQ(load_checkpoint(path).files, fresh.files);
  EXPECT_EQ(entries(path), (std::vector<std::string>{"MANIFEST.json", "only.bin"}));  // old files gone
  EXPECT_EQ(entries(dir.path()), std::vector<std::string>{"c"});                    // no temporaries
  write_file_atomically(dir / "plain-file", "x");
  EXPECT_THROW((void)save_checkpoint(dir.path().string(), "plain-file", fresh), ValueError);
  EXPECT_EQ(read_file(dir / "plain-file"), "x");
}

TEST(IoCheckpoint, UnwritableLocationIsValueError) {
  TempDir dir;
  write_file_atomically(dir / "file", "x");
  expect_value_error([&] { (void)save_checkpoint(dir / "file/ck", "c", sample("x")); },
                     {"make_directories", "exists and is not a directory"});
  expect_value_error([&] { (void)save_checkpoint(dir / "file", "c", sample("x")); }, {"not a directory"});
  fs::create_directory(dir / "ro");
  fs::permissions(dir / "ro", test::kReadOnlyDirectory);
  test::with_user_permissions([&] {
    expect_value_error([&] { (void)save_checkpoint(dir / "ro", "c", sample("x")); }, {"Permission denied"});
  });
  EXPECT_TRUE(entries(dir / "ro").empty());
}

TEST(IoCheckpoint, BadNamesAreValueErrors) {
  TempDir dir;
  const std::string d = dir.path().string();
  EXPECT_THROW((void)save_checkpoint(d, "", sample("x")), ValueError);
  EXPECT_THROW((void)save_checkpoint(d, "a/b", sample("x")), ValueError);
  EXPECT_THROW((void)save_checkpoint(d, ".hidden", sample("x")), ValueError);
  EXPECT_THROW((void)save_checkpoint(d, "..", sample("x")), ValueError);
  CheckpointFiles f;
  f.files["MANIFEST.json"] = "x";
  EXPECT_THROW((void)save_checkpoint(d, "c", f), ValueError);
  f.files.clear();
  f.files["sub/file"] = "x";
  EXPECT_THROW((void)save_checkpoint(d, "c", f), ValueError);
  EXPECT_TRUE(entries(dir.path()).empty());
}

// The pid of a process that has exited (and been reaped), for a "stale" temporary's name.
long dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(IoCheckpoint, StaleTemporariesOfDeadProcessesAreCleaned) {
  TempDir dir;
  const std::string d = dir.path().string();
  const std::string dead = ".tmp-x-" + std::to_string(dead_pid());
  const std::string live = ".tmp-y-1";  // pid 1 always runs
  const std::string mine = ".tmp-z-" + std::to_string(::getpid());  // maybe a concurrent save
  for (const std::string& t : {dead, live, mine}) fs::create_directories(dir.path() / t / "MANIFEST.json");
  save_checkpoint(d, "c", sample("x"));
  EXPECT_FALSE(fs::exists(dir.path() / dead));
  EXPECT_TRUE(fs::exists(dir.path() / live));
  EXPECT_TRUE(fs::exists(dir.path() / mine));
  EXPECT_EQ(list_checkpoints(d), std::vector<std::string>{d + "/c"});
}

TEST(IoCheckpoint, PruneKeepsTheNewest) {
  TempDir dir;
  const std::string d = dir.path().string();
  for (const char* n : {"s-01", "s-02", "s-03", "s-04"}) save_checkpoint(d, n, sample(n));
  prune_checkpoints(d, 2);
  EXPECT_EQ(list_checkpoints(d), (std::vector<std::string>{d + "/s-03", d + "/s-04"}));
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"s-03", "s-04"}));
  prune_checkpoints(d, 5);  // fewer than keep_last: nothing happens
  EXPECT_EQ(list_checkpoints(d).size(), 2u);
  EXPECT_THROW(prune_checkpoints(d, 0), ValueError);
}

}  // namespace
}  // namespace mixprec::io
