// check_same_everywhere: one broadcast from rank 0, one max-reduction to find the first rank
// that differs, and (only on failure) one broadcast of that rank's value for the message.
// agree_or_throw: one max-reduction to find the first rank that failed, and (only on failure) a
// sum for the number of failed ranks and one broadcast of the first one's message.
#include "mixprec/dist/agreement.h"

#include <cmath>
#include <sstream>

namespace mixprec::dist {
namespace {

std::string shortened(const std::string& s) {
  constexpr std::size_t kMax = 200;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "... (" + std::to_string(s.size()) + " bytes)";
}

// The lowest rank for which `flag` is true, or -1: the max of (size - rank) over the flagged
// ranks (small integers are exact in a double).
int lowest_flagged_rank(const Communicator& comm, bool flag) {
  const double worst = comm.allreduce_max(flag ? static_cast<double>(comm.size() - comm.rank()) : 0.0);
  return worst == 0.0 ? -1 : comm.size() - static_cast<int>(worst);
}

}  // namespace

void check_same_everywhere(const Communicator& comm, const std::string& what,
                           const std::string& value) {
  std::string reference = value;
  comm.broadcast(reference, 0);
  const int first = lowest_flagged_rank(comm, reference != value);
  if (first < 0) return;
  std::string theirs = value;
  comm.broadcast(theirs, first);
  std::ostringstream os;
  os << what << " differs between ranks: rank 0 has '" << shortened(reference) << "' but rank " << first << " has '"
     << shortened(theirs) << "' (seen on rank " << comm.rank() << " of " << comm.size()
     << "); start every rank with the same flags, data and mixprec build";
  throw AgreedError("dist.check_same_everywhere", os.str(), first);
}

void agree_or_throw(const Communicator& comm, const std::string& what, const std::string& local_error) {
  const bool failed = !local_error.empty();
  const int first = lowest_flagged_rank(comm, failed);
  if (first < 0) return;
  const auto failures = static_cast<int>(std::lround(comm.allreduce_sum(failed ? 1.0 : 0.0)));
  std::string message = local_error;
  comm.broadcast(message, first);
  std::ostringstream os;
  os << what << " failed on rank " << first << " of " << comm.size();
  if (failures == comm.size() && failures > 1) {
    os << " (and on every other rank)";
  } else if (failures > 1) {
    os << " (and on " << failures - 1 << " other rank" << (failures > 2 ? "s" : "") << ")";
  }
  os << ": " << message;
  throw AgreedError("dist.agree", os.str(), first);
}

}  // namespace mixprec::dist
