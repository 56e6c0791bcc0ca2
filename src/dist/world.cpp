// dist::world(): the MPI communicator when a launcher started this process and MPI is built in,
// SingleProcess otherwise; MPI is initialised on first use and finalised at exit.
#include "mixprec/dist/world.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "mixprec/core/error.h"
#include "mixprec/dist/single_process.h"

#if MIXPREC_HAVE_MPI
#include <mpi.h>

#include "dist/mpi_communicator.h"
#endif

namespace mixprec::dist {
namespace {

// The size of world() once it exists (0 before), for abort_job_if_distributed.
std::atomic<int> world_size{0};

// The number of ranks a launcher announced in the environment, 0 when no launcher is seen, -1
// when one is seen but does not say how many (PMIx sets a rank only).
long launcher_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::strtol(v, nullptr, 10);
  }
  if (std::getenv("PMIX_RANK") != nullptr || std::getenv("PMI_RANK") != nullptr) return -1;
  return 0;
}

#if MIXPREC_HAVE_MPI
// Seconds a rank waits at exit for every other rank to reach exit too (MIXPREC_DIST_EXIT_TIMEOUT,
// default 30).
double exit_timeout_seconds() {
  if (const char* v = std::getenv("MIXPREC_DIST_EXIT_TIMEOUT")) {
    char* end = nullptr;
    const double t = std::strtod(v, &end);
    if (end != v && t >= 0) return t;
  }
  return 30.0;
}

// Owns MPI's initialisation; a function-local static, so it is constructed once and its
// destructor (MPI_Finalize) runs at exit, after the communicator built on it is destroyed.
//
// MPI_Finalize waits for every rank. A rank that exits early (std::exit(3) after an error seen
// by it alone) while its peers wait in a collective for it would then wait forever, and so would
// they. So at exit the ranks first meet in a non-blocking barrier on a communicator of their own,
// polled until MIXPREC_DIST_EXIT_TIMEOUT: if every rank arrives, they finalise together; if not,
// this rank leaves without MPI_Finalize, and mpirun, seeing a rank exit without finalising, ends
// the whole job with a non-zero status. Programs whose ranks may legitimately reach exit far
// apart (rank 0 writing a large checkpoint) call world().barrier() before returning from main.
struct MpiRuntime {
  MpiRuntime() {
    int initialized = 0;
    MPI_Initialized(&initialized);
    if (initialized) return;  // the application initialised MPI itself; it finalises too
    int provided = 0;
    // FUNNELED: mixprec's kernels use OpenMP threads, but only the main thread calls MPI.
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    MIXPREC_CHECK(rc == MPI_SUCCESS, BackendError, "dist.world",
                  "MPI_Init_thread failed with code " << rc
                      << "; check that the job was started by a working mpirun/srun");
    owner = true;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &exit_comm) != MPI_SUCCESS) exit_comm = MPI_COMM_NULL;
    if (exit_comm != MPI_COMM_NULL) MPI_Comm_set_errhandler(exit_comm, MPI_ERRORS_RETURN);
  }
  ~MpiRuntime() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!owner || finalized) return;
    if (exit_comm != MPI_COMM_NULL && !all_ranks_at_exit()) return;  // mpirun ends the job
    if (exit_comm != MPI_COMM_NULL) MPI_Comm_free(&exit_comm);
    MPI_Finalize();
  }
  bool all_ranks_at_exit() {
    MPI_Request request = MPI_REQUEST_NULL;
    if (MPI_Ibarrier(exit_comm, &request) != MPI_SUCCESS) return false;
    const double timeout = exit_timeout_seconds();
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
    for (;;) {
      int done = 0;
      if (MPI_Test(&request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
      if (done) return true;
      if (std::chrono::steady_clock::now() > deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    int rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr,
                 "mixprec: rank %d is exiting but other ranks did not reach exit within %g s "
                 "(MIXPREC_DIST_EXIT_TIMEOUT); leaving without MPI_Finalize so that the launcher "
                 "ends the job\n",
                 rank, timeout);
    return false;
  }
  bool owner = false;
  MPI_Comm exit_comm = MPI_COMM_NULL;
};
#endif

std::unique_ptr<Communicator> make_world() {
  const long launched = launcher_size();
#if MIXPREC_HAVE_MPI
  if (launched != 0) {
    static MpiRuntime runtime;  // completes before the communicator, so it is destroyed after it
    return std::make_unique<MpiCommunicator>(MPI_COMM_WORLD);
  }
#else
  // A launcher that gives no size (PMIx) still reveals "one of several" on ranks other than 0.
  const char* pmix_rank = std::getenv("PMIX_RANK");
  const bool one_of_many =
      launched > 1 || (launched < 0 && pmix_rank != nullptr && std::string(pmix_rank) != "0");
  MIXPREC_CHECK(!one_of_many, BackendError, "dist.world",
                "this process was started by an MPI launcher as one of several ranks, but this "
                "mixprec was built without MPI (each rank would train alone); rebuild with "
                "-DMIXPREC_MPI=ON (needs libopenmpi-dev) or run a single process");
#endif
  return std::make_unique<SingleProcess>();
}

}  // namespace

const Communicator& world() {
  static const std::unique_ptr<Communicator> comm = [] {
    std::unique_ptr<Communicator> c = make_world();
    world_size = c->size();
    return c;
  }();
  return *comm;
}

bool mpi_built_in() {
#if MIXPREC_HAVE_MPI
  return true;
#else
  return false;
#endif
}

std::string mpi_library_version() {
#if MIXPREC_HAVE_MPI
  char text[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  // One of the few MPI calls allowed before MPI_Init.
  if (MPI_Get_library_version(text, &len) != MPI_SUCCESS) return "unknown";
  std::string s(text, static_cast<std::size_t>(len));
  const std::size_t eol = s.find_first_of("\r\n");
  if (eol != std::string::npos) s.resize(eol);
  while (!s.empty() && (s.back() == '\0' || s.back() == ' ' || s.back() == ',')) s.pop_back();
  return s;
#else
  return "";
#endif
}

void abort_job(int exit_code) {
#if MIXPREC_HAVE_MPI
  int initialized = 0;
  int finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, exit_code);
#endif
  std::exit(exit_code);
}

void abort_job_if_distributed(int exit_code) {
  if (world_size.load() > 1) abort_job(exit_code);
}

}  // namespace mixprec::dist
