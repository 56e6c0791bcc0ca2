// Graph capture and replay (core/device_graph.h) on devsim, whose capture records kernel calls
// and device copies with their arguments and replays them, under the rules of a CUDA graph:
// nothing runs while capturing, a replay reads the memory as it is then (with the arguments of
// the capture), a host transfer inside throws naming its reason, the capture's allocations come
// from a pool no other tensor gets, other threads' transfers wait for the capture to close, and
// a rehearsal notes what would break a capture while running the work.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "backend_scope.h"
#include "core/cuda_runtime.h"
#include "core/device_graph.h"
#include "core/memory_pool.h"
#include "kernels/elementwise.h"
#include "mixprec/core/error.h"
#include "mixprec/core/storage.h"
#include "mixprec/core/transfer.h"
#include "mixprec/tensor/tensor.h"

namespace mixprec::detail {
namespace {

std::vector<float> host(const Tensor& t) { return t.to_vector(); }

TEST(DeviceGraph, NothingRunsWhileCapturingAndAReplayReadsTheMemoryAsItIsThen) {
  testing::BackendScope devsim("devsim");
  const Tensor x = Tensor::full({4}, 1.0f);
  const Tensor y = Tensor::full({4}, 0.0f);
  std::unique_ptr<DeviceGraph> graph;
  {
    GraphCapture capture;
    kernels::affine(x.data_ptr(), DType::f32, y.data_ptr(), DType::f32, 4, 2.0f, 1.0f);
    device_copy(x.data_ptr(), y.data_ptr(), 4 * sizeof(float), x.device());  // x = y, recorded
    graph = capture.finish();
  }
  EXPECT_EQ(graph->nodes(), 2u);
  EXPECT_EQ(host(y), std::vector<float>(4, 0.0f));  // recorded, not run
  EXPECT_EQ(host(x), std::vector<float>(4, 1.0f));
  graph->replay();  // y = 2 * 1 + 1; x = y
  EXPECT_EQ(host(y), std::vector<float>(4, 3.0f));
  EXPECT_EQ(host(x), std::vector<float>(4, 3.0f));
  graph->replay();  // the same arguments (alpha 2, beta 1) on the memory as it is now
  EXPECT_EQ(host(y), std::vector<float>(4, 7.0f));
}

TEST(DeviceGraph, AHostTransferInsideThrowsNamingItsReasonAndTheNextCaptureWorks) {
  testing::BackendScope devsim("devsim");
  const Tensor x = Tensor::full({4}, 1.0f);
  const std::vector<float> values(4, 5.0f);
  try {
    GraphCapture capture;
    const TransferReason why("the test's upload");
    upload(x.data_ptr(), values.data(), sizeof(float) * 4, x.device());
    FAIL() << "an upload inside a capture was accepted";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("an upload (the test's upload) inside the capture"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(capturing());
  EXPECT_EQ(host(x), std::vector<float>(4, 1.0f));  // nothing was written
  GraphCapture again;
  kernels::fill(x.data_ptr(), DType::f32, 4, 2.0f);
  again.finish()->replay();
  EXPECT_EQ(host(x), std::vector<float>(4, 2.0f));
}

TEST(DeviceGraph, ARefusingOpFailsTheGraphWithItsReason) {
  testing::BackendScope devsim("devsim");
  GraphCapture capture;
  note_capture_refusal("the op's seed is the host's");
  try {
    capture.finish();
    FAIL() << "a refused capture made a graph";
  } catch (const StateError& e) {
    EXPECT_NE(std::string(e.what()).find("not capturable: the op's seed is the host's"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceGraph, TheCapturesAllocationsComeFromItsPoolAndStayThere) {
  testing::BackendScope devsim("devsim");
  std::unique_ptr<DeviceGraph> graph;
  const void* temporary = nullptr;
  {
    GraphCapture capture;
    {
      Storage a(1000, MemoryCategory::activation);
      temporary = a.data();
    }
    // Freed inside the capture, the block serves the capture's next request of its size.
    Storage b(1000, MemoryCategory::activation);
    EXPECT_EQ(b.data(), temporary);
    graph = capture.finish();
  }
  EXPECT_GE(graph->pool()->reserved_bytes(), 1000u);
  // After the capture, no tensor outside it gets the pool's block (a replay writes it).
  std::vector<std::unique_ptr<Storage>> outside;
  for (int i = 0; i < 8; ++i) {
    outside.push_back(std::make_unique<Storage>(1000, MemoryCategory::activation));
    EXPECT_NE(outside.back()->data(), temporary);
  }
}

TEST(DeviceGraph, GraphsSharingAPoolReuseEachOthersFreedBlocks) {
  testing::BackendScope devsim("devsim");
  auto pool = std::make_shared<MemoryPool>(current_device());
  const void* a_temporary = nullptr;
  std::unique_ptr<DeviceGraph> a, b;
  {
    GraphCapture capture(pool);
    Storage t(4096, MemoryCategory::activation);
    a_temporary = t.data();
    a = capture.finish();  // t dies after the capture: its block is free in the pool
  }
  const std::size_t reserved = pool->reserved_bytes();
  {
    GraphCapture capture(pool);
    Storage t(4096, MemoryCategory::activation);
    EXPECT_EQ(t.data(), a_temporary);  // the second graph takes the first one's temporary
    b = capture.finish();
  }
  EXPECT_EQ(pool->reserved_bytes(), reserved);  // one step's memory, not one per graph
  EXPECT_EQ(a->pool(), b->pool());
}

TEST(DeviceGraph, AKernelsScratchInsideACaptureComesFromItsPool) {
  // The cuda kernels' per-call scratch (kernels/cuda/launch.cuh, cuDNN's workspace) is given
  // back when the call ends, before its kernels run: inside a capture it must stay the graph's.
  testing::BackendScope devsim("devsim");
  std::unique_ptr<DeviceGraph> graph;
  const void* scratch = nullptr;
  {
    GraphCapture capture;
    std::shared_ptr<void> from;
    scratch = cuda_scratch_acquire(8192, from);
    ASSERT_NE(scratch, nullptr);
    EXPECT_NE(from, nullptr);
    cuda_scratch_release(const_cast<void*>(scratch), 8192, from);
    graph = capture.finish();
  }
  EXPECT_GE(graph->pool()->reserved_bytes(), 8192u);
  Storage after(8192, MemoryCategory::workspace);  // outside: never the graph's scratch
  EXPECT_NE(after.data(), scratch);
}

TEST(DeviceGraph, AnotherThreadsTransferWaitsUntilTheCaptureCloses) {
  testing::BackendScope devsim("devsim");
  const Tensor x = Tensor::full({4}, 1.0f);
  const std::vector<float> values(4, 9.0f);
  std::atomic<bool> uploaded{false};
  std::thread loader;
  {
    GraphCapture capture;
    loader = std::thread([&] {
      upload(x.data_ptr(), values.data(), sizeof(float) * 4, x.device());
      uploaded = true;
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    EXPECT_FALSE(uploaded.load()) << "an upload entered the open capture";
    capture.finish();
  }
  loader.join();
  EXPECT_TRUE(uploaded.load());
  EXPECT_EQ(host(x), std::vector<float>(4, 9.0f));
}

TEST(DeviceGraph, ARehearsalNotesWhatWouldBreakACaptureAndRunsTheWork) {
  testing::BackendScope devsim("devsim");
  const Tensor x = Tensor::full({4}, 1.0f);
  const std::vector<float> values(4, 4.0f);
  CaptureRehearsal rehearsal;
  kernels::fill(x.data_ptr(), DType::f32, 4, 2.0f);
  EXPECT_EQ(rehearsal.failure(), "");
  {
    const TransferReason why("rehearsed upload");
    upload(x.data_ptr(), values.data(), sizeof(float) * 4, x.device());
  }
  note_capture_refusal("later");
  EXPECT_NE(rehearsal.failure().find("an upload (rehearsed upload)"), std::string::npos)
      << rehearsal.failure();
  EXPECT_EQ(host(x), std::vector<float>(4, 4.0f));  // the work ran
}

TEST(DeviceGraph, IsRefusedOnTheCpu) {
  testing::BackendScope cpu("cpu");
  EXPECT_THROW(GraphCapture(), ValueError);
  EXPECT_FALSE(capturing());
}

}  // namespace
}  // namespace mixprec::detail
