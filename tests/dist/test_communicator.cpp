// SingleProcess, dist::world() outside a launcher, check_same_everywhere on one rank, the
// shares of the deterministic reduce-scatter and all-gather, and the wire formats' names. Multi-rank behaviour: tests/dist/dist_check.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "mixprec/core/error.h"
#include "mixprec/dist/agreement.h"
#include "mixprec/dist/single_process.h"
#include "mixprec/dist/world.h"

namespace mixprec::dist {
namespace {

TEST(SingleProcess, IsRankZeroOfOne) {
  SingleProcess comm;
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.name(), "single-process");
  comm.barrier();
}

TEST(SingleProcess, AllreduceSumLeavesDataBitForBit) {
  SingleProcess comm;
  std::vector<float> data = {1e8f, 1.0f, -0.0f, std::numeric_limits<float>::infinity(),
                             std::numeric_limits<float>::quiet_NaN()};
  const std::vector<float> before = data;
  comm.allreduce_sum(data.data(), data.size());
  ASSERT_EQ(data.size(), before.size());
  EXPECT_EQ(std::memcmp(data.data(), before.data(), data.size() * sizeof(float)), 0);
  comm.allreduce_sum(nullptr, 0);
  EXPECT_THROW(comm.allreduce_sum(nullptr, 3), ValueError);
  // One rank sends nothing, so a 16-bit wire rounds nothing either.
  data[1] = 1.0f + 1.0f / 1024.0f;  // not a bf16 value
  const std::vector<float> again = data;
  comm.allreduce_sum(data.data(), data.size(), WireDType::bf16);
  comm.reduce_scatter_sum(data.data(), data.size(), WireDType::f16);
  comm.allgather(data.data(), data.size(), WireDType::bf16);
  EXPECT_EQ(std::memcmp(data.data(), again.data(), data.size() * sizeof(float)), 0);
  EXPECT_THROW(comm.reduce_scatter_sum(nullptr, 3), ValueError);
  EXPECT_THROW(comm.allgather(nullptr, 3), ValueError);
  EXPECT_EQ(comm.my_shard(7).begin, 0u);
  EXPECT_EQ(comm.my_shard(7).count, 7u);
}

TEST(SingleProcess, AllreduceSumOfADoubleIsTheValue) {
  SingleProcess comm;
  EXPECT_EQ(comm.allreduce_sum(0.1), 0.1);
}

TEST(WireDType, NamesRoundTripAndUnknownOnesAreRefusedWithTheChoices) {
  for (WireDType w : {WireDType::f32, WireDType::bf16, WireDType::f16}) {
    EXPECT_EQ(parse_wire_dtype(name(w)), w);
  }
  try {
    parse_wire_dtype("fp8");
    ADD_FAILURE() << "fp8 accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("--wire-dtype"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bf16"), std::string::npos) << e.what();
  }
}

TEST(SingleProcess, AllreduceMaxIsTheValue) {
  SingleProcess comm;
  EXPECT_EQ(comm.allreduce_max(2.5), 2.5);
  EXPECT_EQ(comm.allreduce_max(-std::numeric_limits<double>::infinity()),
            -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(comm.allreduce_max(std::nan(""))));
}

TEST(SingleProcess, BroadcastFromRootZeroOnly) {
  SingleProcess comm;
  std::string s("a\0b", 3);
  comm.broadcast(s, 0);
  EXPECT_EQ(s, std::string("a\0b", 3));
  try {
    comm.broadcast(s, 1);
    FAIL() << "root 1 accepted";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find("root 1 is not a rank"), std::string::npos) << e.what();
  }
}

TEST(World, IsSingleProcessWithoutALauncher) {
  // ctest does not run this binary under mpirun, so no launcher variables are set.
  ASSERT_EQ(std::getenv("OMPI_COMM_WORLD_SIZE"), nullptr);
  const Communicator& comm = world();
  EXPECT_EQ(&comm, &world());
  EXPECT_EQ(comm.size(), 1);
  EXPECT_EQ(comm.rank(), 0);
  EXPECT_EQ(comm.name(), "single-process");
}

TEST(World, ReportsMpiSupport) {
  const std::string version = mpi_library_version();
  if (mpi_built_in()) {
    EXPECT_FALSE(version.empty());
    EXPECT_EQ(version.find('\n'), std::string::npos) << version;
    EXPECT_EQ(version.find(std::string(1, 0)), std::string::npos) << version;
  } else {
    EXPECT_TRUE(version.empty()) << version;
  }
}

TEST(CheckSameEverywhere, OneRankAgreesWithItself) {
  SingleProcess comm;
  EXPECT_NO_THROW(check_same_everywhere(comm, "config hash", "abc"));
  EXPECT_NO_THROW(check_same_everywhere(comm, "empty", ""));
}

TEST(Agreement, OneRankPassesItsOwnErrorsThrough) {
  SingleProcess comm;
  EXPECT_NO_THROW(agree_or_throw(comm, "loading", ""));
  // agree runs the function unguarded: the exception keeps its type and message.
  int runs = 0;
  agree(comm, "nothing", [&] { ++runs; });
  EXPECT_EQ(runs, 1);
  EXPECT_THROW(agree(comm, "loading", [] { MIXPREC_CHECK(false, StateError, "load", "damaged"); }), StateError);
  // agree_or_throw with a local error names rank 0 of 1.
  try {
    agree_or_throw(comm, "loading the data", "read_idx: missing");
    FAIL() << "agree_or_throw did not throw";
  } catch (const AgreedError& e) {
    EXPECT_STREQ(e.what(), "dist.agree: loading the data failed on rank 0 of 1: read_idx: missing");
    EXPECT_EQ(e.failed_rank(), 0);
  }
}

TEST(World, AbortIfDistributedReturnsInOneProcess) {
  ASSERT_EQ(world().size(), 1);
  abort_job_if_distributed(3);  // must return: one process has nobody waiting for it
  SUCCEED();
}

TEST(Shards, TileTheBufferInRankOrder) {
  for (std::size_t n : {0u, 1u, 2u, 3u, 7u, 1000u, 1001u}) {
    for (int p : {1, 2, 3, 4, 7}) {
      std::size_t next = 0;
      std::size_t smallest = n, largest = 0;
      for (int k = 0; k < p; ++k) {
        const Shard c = shard_of(n, p, k);
        EXPECT_EQ(c.begin, next) << "n=" << n << " p=" << p << " k=" << k;
        next = c.begin + c.count;
        smallest = std::min(smallest, c.count);
        largest = std::max(largest, c.count);
      }
      EXPECT_EQ(next, n) << "n=" << n << " p=" << p;
      EXPECT_LE(largest - smallest, 1u) << "n=" << n << " p=" << p;
    }
  }
}

}  // namespace
}  // namespace mixprec::dist
