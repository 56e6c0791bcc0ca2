// check_same_everywhere: one broadcast from rank 0, one max-reduction to find the first rank
// that differs, and (only on failure) one broadcast of that rank's value for the message.
#include "mixprec/dist/agreement.h"

#include "mixprec/core/error.h"

namespace mixprec::dist {
namespace {

std::string shortened(const std::string& s) {
  constexpr std::size_t kMax = 200;
  return s.size() <= kMax ? s : s.substr(0, kMax) + "... (" + std::to_string(s.size()) + " bytes)";
}

}  // namespace

void check_same_everywhere(const Communicator& comm, const std::string& what,
                           const std::string& value) {
  std::string reference = value;
  comm.broadcast(reference, 0);
  // The max of (size - rank) over the ranks that differ picks the lowest differing rank; small
  // integers are exact in a double.
  const bool differs = reference != value;
  const double worst = comm.allreduce_max(differs ? static_cast<double>(comm.size() - comm.rank()) : 0.0);
  if (worst == 0.0) return;
  const int first = comm.size() - static_cast<int>(worst);
  std::string theirs = value;
  comm.broadcast(theirs, first);
  MIXPREC_CHECK(false, ValueError, "dist.check_same_everywhere",
                what << " differs between ranks: rank 0 has '" << shortened(reference)
                     << "' but rank " << first << " has '" << shortened(theirs)
                     << "' (seen on rank " << comm.rank() << " of " << comm.size()
                     << "); start every rank with the same flags, data and mixprec build");
}

}  // namespace mixprec::dist
