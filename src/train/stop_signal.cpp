// The handler does only what is async-signal-safe: it stores into a volatile sig_atomic_t, or,
// the second time, write(2)s a fixed message and _exit()s. Everything else (finishing the step,
// writing the checkpoint, the message naming it) happens in the training loop, which polls the
// flag between optimizer steps.
#include "train/stop_signal.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstring>

#include "mixprec/core/error.h"

namespace mixprec::train::detail {
namespace {

volatile std::sig_atomic_t g_received = 0;
std::atomic<bool> g_installed{false};
struct sigaction g_old_int {}, g_old_term {};
stack_t g_old_stack{};

// The handler runs on its own stack. oneDNN 2.6's JIT matmul kernels keep data below the stack
// pointer, past the 128-byte red zone the kernel leaves when it pushes a signal frame, so a
// handler run on the training thread's stack corrupts that data: with SIGUSR1 sent every 2 ms
// to `mixprec train`, glibc aborted ("corrupted size vs. prev_size") after ~50 signals in fp32,
// bf16 and fp16 alike; with MIXPREC_MATMUL=ref, or with this alternate stack, 14,000 signals did
// nothing. A process-directed signal goes to the main thread (the one training, which installs
// this) unless it blocks it. 64 KiB: far above the largest signal frame (AMX state, ~11 KiB).
alignas(64) char g_stack[1 << 16];

// Fixed texts: nothing may be formatted inside a handler.
constexpr char kSecondTerm[] =
    "mixprec: second SIGTERM: exiting at once (status 143); complete checkpoints are intact and "
    "--resume ignores an unfinished one\n";
constexpr char kSecondInt[] =
    "mixprec: second SIGINT: exiting at once (status 130); complete checkpoints are intact and "
    "--resume ignores an unfinished one\n";

extern "C" void on_stop_signal(int sig) {
  if (g_received != 0) {
    const char* text = sig == SIGINT ? kSecondInt : kSecondTerm;
    const std::size_t n = sig == SIGINT ? sizeof kSecondInt - 1 : sizeof kSecondTerm - 1;
    // The result does not matter: we are leaving either way.
    [[maybe_unused]] const ssize_t ignored = ::write(STDERR_FILENO, text, n);
    ::_exit(128 + sig);
  }
  g_received = sig;
}

}  // namespace

StopSignals::StopSignals(bool install) {
  if (!install) return;
  bool expected = false;
  MIXPREC_CHECK(g_installed.compare_exchange_strong(expected, true), StateError, "train",
                "stop-signal handling is already installed (one Trainer::run at a time may handle "
                "SIGINT/SIGTERM)");
  g_received = 0;
  stack_t stack{};
  stack.ss_sp = g_stack;
  stack.ss_size = sizeof g_stack;
  ::sigaltstack(&stack, &g_old_stack);
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  // SA_RESTART: a signal during a read or write (data, checkpoint) must not turn into EINTR
  // errors in code that does not expect them. SA_ONSTACK: see g_stack.
  sa.sa_flags = SA_RESTART | SA_ONSTACK;
  ::sigaction(SIGINT, &sa, &g_old_int);
  ::sigaction(SIGTERM, &sa, &g_old_term);
  installed_ = true;
}

StopSignals::~StopSignals() {
  if (!installed_) return;
  ::sigaction(SIGINT, &g_old_int, nullptr);
  ::sigaction(SIGTERM, &g_old_term, nullptr);
  ::sigaltstack(&g_old_stack, nullptr);
  g_installed.store(false);
}

int StopSignals::received() const { return installed_ ? static_cast<int>(g_received) : 0; }

const char* signal_name(int signal) {
  switch (signal) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    default: return "a signal";
  }
}

}  // namespace mixprec::train::detail
