#pragma once
/// The communicator interface (runtime/communicator.h: it sits below the ops that communicate)
/// under the names of the distributed floor, where its implementations are: dist::Communicator,
/// dist::WireDType and the rest are runtime's own types, not copies.
#include "mixprec/runtime/communicator.h"

namespace mixprec::dist {

using runtime::Communicator;
using runtime::name;
using runtime::parse_wire_dtype;
using runtime::PendingReduction;
using runtime::Shard;
using runtime::shard_of;
using runtime::WireDType;

}  // namespace mixprec::dist
