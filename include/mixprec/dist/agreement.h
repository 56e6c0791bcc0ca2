#pragma once
/// Start-up agreement: ranks started with different flags, data or builds must refuse to train
/// together rather than silently average gradients of different models.
#include <string>

#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// Collective: checks that value (a config hash, a build id, a checksum) is the same on every
/// rank. If any rank differs from rank 0, throws ValueError on every rank, naming `what`, the
/// first differing rank and both values (shortened to 200 characters), so that all ranks stop
/// together. `what` should be the same string on every rank.
void check_same_everywhere(const Communicator& comm, const std::string& what,
                           const std::string& value);

}  // namespace mixprec::dist
