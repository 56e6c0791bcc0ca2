#pragma once
// The backend conformance cases (conformance_cases.cpp): every kernel of the Backend table, in
// every dtype it takes, run on a given backend from inputs generated from fixed seeds, each output
// with how it must match the reference's:
//   exact:  the same bits (conversions, optimizer updates, unscale, max/min, pooling maxima, ...)
//   close:  |got - ref| <= atol [+ atol_each[i]] + |ref| * k * eps(dtype); NaN meets NaN, Inf
//           the same Inf.
// Two harnesses run them: test_backend_conformance.cpp (cpu on every SIMD target) and
// test_device_conformance.cpp (a device backend, its buffers staged to the device).
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "kernels/backend.h"
#include "kernels/kernel_test_util.h"

namespace mixprec::kernels::conformance {

/// One output of a kernel run and how it must match the reference.
struct Out {
  std::string what;
  ktest::Buffer buf;
  bool exact = false;
  double atol = 0.0;
  double k = 0.0;
  /// Per-element additions to atol (empty: none): for an output whose allowed error follows
  /// another value's size, not its own (GELU of a pre-activation rounded differently).
  std::vector<double> atol_each = {};
};
using Outs = std::vector<Out>;

/// A kernel case: a name (the entry it covers), the dtypes it runs in, and the run itself.
struct Case {
  std::string name;
  std::vector<DType> dtypes;
  std::function<Outs(const Backend&, DType)> run;
};

/// gtest prints a case by its name (not its bytes).
inline void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

/// Every case, one or more per entry of the table.
std::vector<Case> cases();
/// The transformer kernels' cases (conformance_transformer_cases.cpp), which cases() includes.
void add_transformer_cases(std::vector<Case>& cases);
/// The optimizer and loss-scaler kernels' cases (conformance_optim_cases.cpp), which cases()
/// includes.
void add_optim_cases(std::vector<Case>& cases);
/// Cases that steer a device backend down each of its internal paths (16-byte and one element
/// per step, layer norm's groups and chunks: conformance_path_cases.cpp), which cases() includes.
void add_path_cases(std::vector<Case>& cases);
/// The gelu_tanh post-op's cases: matmul with it, matmul_aux, matmul_post_op_backward
/// (conformance_matmul_gelu_cases.cpp), which cases() includes.
void add_matmul_gelu_cases(std::vector<Case>& cases);
/// Batch norm, pooling and convolution cases (conformance_image_cases.cpp), which cases()
/// includes.
void add_image_cases(std::vector<Case>& cases);

/// Expects got to match want output by output (gtest failures name `where`).
void compare(const Outs& got, const Outs& want, const std::string& where);

/// Sets the active backend for the scope (kernels may call entry points internally).
class BackendScope {
 public:
  explicit BackendScope(const Backend& b) : saved_(set_backend(b.name)) {}
  ~BackendScope() { set_backend(saved_); }
  BackendScope(const BackendScope&) = delete;
  BackendScope& operator=(const BackendScope&) = delete;

 private:
  std::string saved_;
};

}  // namespace mixprec::kernels::conformance
