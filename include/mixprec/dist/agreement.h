#pragma once
/// Agreement between ranks: ranks started with different flags, data or builds must refuse to
/// train together rather than silently average gradients of different models, and a step that
/// fails on some ranks only (a checkpoint or data file missing or damaged on one node) must stop
/// every rank at once, with the same message, instead of leaving the others waiting in a
/// collective for a rank that has gone.
#include <exception>
#include <string>

#include "mixprec/core/error.h"
#include "mixprec/dist/communicator.h"

namespace mixprec::dist {

/// The error that every rank throws at the same collective after the ranks agreed that the job
/// cannot go on (agree_or_throw, agree, check_same_everywhere). No rank is left waiting for
/// another, so a program may simply return from main (MPI then finalises on every rank together);
/// any other exception may have been seen by one rank alone (see abort_job_if_distributed).
class AgreedError : public ValueError {
 public:
  AgreedError(const std::string& op, const std::string& message, int failed_rank)
      : ValueError(op, message), failed_rank_(failed_rank) {}
  /// The lowest rank on which the failure was seen.
  int failed_rank() const noexcept { return failed_rank_; }

 private:
  int failed_rank_;
};

/// Collective: checks that value (a config hash, a build id, a checksum) is the same on every
/// rank. If any rank differs from rank 0, throws AgreedError on every rank, naming `what`, the
/// first differing rank and both values (shortened to 200 characters), so that all ranks stop
/// together. `what` should be the same string on every rank.
void check_same_everywhere(const Communicator& comm, const std::string& what,
                           const std::string& value);

/// Collective: every rank reports how its part of `what` went: local_error is "" on success,
/// else the rank's error message. If any rank failed, every rank throws the same AgreedError,
///   "dist.agree: <what> failed on rank R of N[ (and on K other ranks)]: <rank R's message>",
/// R being the lowest failing rank (one max-reduction when every rank succeeded; on failure one
/// more reduction and a broadcast of rank R's message). With one rank it throws when
/// local_error is not empty, naming rank 0 of 1.
void agree_or_throw(const Communicator& comm, const std::string& what, const std::string& local_error);

/// Runs f on every rank, then agree_or_throw on how it went: if f threw on any rank, every rank
/// throws the same AgreedError naming the lowest rank that failed and its message. f must not
/// call a collective (a rank whose f threw before it would leave the others waiting in it).
/// With one rank, f runs unguarded: its exception propagates unchanged.
template <class F>
void agree(const Communicator& comm, const std::string& what, F&& f) {
  if (comm.size() == 1) {
    f();
    return;
  }
  std::string error;
  try {
    f();
  } catch (const std::exception& e) {
    error = e.what();
    if (error.empty()) error = "an exception without a message";
  } catch (...) {
    error = "an exception that is not a std::exception";
  }
  agree_or_throw(comm, what, error);
}

}  // namespace mixprec::dist
