#pragma once
// Private POSIX helpers shared by atomic_file.cpp and checkpoint.cpp.
#include <string>
#include <string_view>

namespace mixprec::io::detail {

/// Creates or truncates path, writes bytes, fsyncs and closes it; on failure removes the file and
/// throws ValueError(op, "cannot write '<shown>': <strerror>") (shown: the path the caller's
/// user asked for, when path is a temporary name; empty means path).
void write_file_synced(const std::string& path, std::string_view bytes, const char* op,
                       const std::string& shown = {});

/// fsyncs a directory so renames and creations inside it survive a crash; ValueError(op, ...) on
/// failure. Filesystems that cannot fsync directories (EINVAL) are accepted silently.
void sync_directory(const std::string& dir, const char* op);

/// The directory holding path ("." for a bare file name).
std::string parent_directory(const std::string& path);

}  // namespace mixprec::io::detail
