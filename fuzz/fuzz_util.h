#pragma once
// Shared by the fuzz targets: a per-process scratch directory for parsers that take a path, and
// the rule that mixprec's own exceptions (mixprec::Error and its subclasses) are the expected
// outcome for bad input, while anything else escaping is a finding.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "mixprec/core/error.h"

namespace mixprec::fuzz {

/// A directory of this process, created once and removed at exit.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::temp_directory_path() /
                              ("mixprec-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    static const std::filesystem::path cleanup = d;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(cleanup, ec);
    });
    return d;
  }();
  return dir;
}

/// Writes bytes to scratch_dir()/name and returns its path.
inline std::string write_scratch(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = scratch_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::perror("fuzz: cannot write a scratch file");
    std::abort();
  }
  return p.string();
}

inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Runs f; mixprec::Error is the clean rejection of bad input, anything else aborts (a finding).
template <class F>
int run_one(F&& f) {
  try {
    f();
  } catch (const mixprec::Error&) {
    // Expected: the parser refused the input with a typed error.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: uncaught non-mixprec exception: %s\n", e.what());
    std::abort();
  }
  return 0;
}

}  // namespace mixprec::fuzz
