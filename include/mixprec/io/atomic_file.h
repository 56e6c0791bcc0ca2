#pragma once
/// Whole-file I/O that never leaves a half-written file behind: a crash or error while writing
/// leaves either the old contents or the complete new ones under the target name. Every error is
/// a ValueError naming the path and the operating system's reason.
#include <string>
#include <string_view>

namespace mixprec::io {

/// Replaces the file at path with bytes, atomically: writes "<path>.tmp.<pid>.<counter>" in the
/// same directory, fsyncs it, renames it over path, then fsyncs the directory. On failure removes
/// the temporary file and throws ValueError("write_file_atomically: cannot write '<path>': ...").
/// The parent directory must exist (see make_directories).
void write_file_atomically(const std::string& path, std::string_view bytes);

/// The whole contents of a regular file; ValueError("read_file: cannot read '<path>': ...") if it
/// is missing, a directory or unreadable.
std::string read_file(const std::string& path);

/// Creates the directory path and any missing parents (like mkdir -p); nothing if it exists.
/// ValueError("make_directories: ...") naming the component that exists as a non-directory, or
/// the operating system's reason (e.g. permission denied).
void make_directories(const std::string& path);

}  // namespace mixprec::io
