#pragma once
// The current time as an ISO 8601 UTC timestamp ("2026-11-24T13:18:59Z"): how checkpoints,
// run logs and lock files say when they were made.
#include <ctime>
#include <string>

namespace mixprec::io {

inline std::string utc_timestamp_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace mixprec::io
