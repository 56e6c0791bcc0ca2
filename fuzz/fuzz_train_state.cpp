// Fuzzes a training checkpoint's state.json through train::checkpoint_config (what `mixprec
// train --resume` and `mixprec eval` read first): the input is state.json, and the harness
// writes a MANIFEST.json with its true size and SHA-256 so the checkpoint verifies.
#include "fuzz_util.h"
#include "mixprec/io/checkpoint.h"
#include "mixprec/io/sha256.h"
#include "mixprec/train/trainer.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view state = mixprec::fuzz::as_view(data, size);
  const std::string file = mixprec::fuzz::write_scratch("state-ckpt/state.json", state);
  mixprec::fuzz::write_scratch(
      "state-ckpt/MANIFEST.json",
      R"({"format": "mixprec.checkpoint", "version": 1, "created": "2026-01-01T00:00:00Z", )"
      R"("files": {"state.json": {"sha256": ")" + mixprec::io::sha256_hex(state) +
          R"(", "bytes": )" + std::to_string(size) + "}}}");
  const std::string dir = std::filesystem::path(file).parent_path().string();
  return mixprec::fuzz::run_one([&] { (void)mixprec::train::checkpoint_config(dir); });
}
