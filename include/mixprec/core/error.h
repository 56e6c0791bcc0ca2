#pragma once
/// Errors: user mistakes throw a typed exception whose message starts with the op name;
/// our own bugs trip MIXPREC_ASSERT. Library code never aborts or exits.
#include <sstream>
#include <stdexcept>
#include <string>

namespace mixprec {

/// Base of every exception mixprec throws; what() reads "<op>: <what went wrong and what to do>".
class Error : public std::runtime_error {
 public:
  Error(const std::string& op, const std::string& message)
      : std::runtime_error(op + ": " + message), op_(op) {}
  /// The op or component that raised the error, e.g. "matmul".
  const std::string& op() const noexcept { return op_; }

 private:
  std::string op_;
};

/// Shapes that do not fit together (matmul inner dimensions, broadcasting, reshape sizes).
class ShapeError : public Error { using Error::Error; };
/// A dtype an op cannot take, or two dtypes that must agree and do not.
class DTypeError : public Error { using Error::Error; };
/// A bad argument value: negative size, out-of-range index, absurd hyper-parameter.
class ValueError : public Error { using Error::Error; };
/// An object used in a state that forbids it: moved-from tensor, backward twice, misuse order.
class StateError : public Error { using Error::Error; };
/// A backend (oneDNN, a CPU feature) is missing or failed at run time.
class BackendError : public Error { using Error::Error; };
/// An invariant of mixprec itself was broken: a bug in mixprec, please report it.
class InternalError : public Error { using Error::Error; };

namespace detail {
template <class E>
[[noreturn]] void throw_error(const char* op, const std::string& message) {
  throw E(op, message);
}
}  // namespace detail

}  // namespace mixprec

/// Throws ExcType("<op>: <message>") when cond is false; message is a stream expression.
#define MIXPREC_CHECK(cond, ExcType, op, message)                        \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      std::ostringstream mixprec_check_os_;                              \
      mixprec_check_os_ << message;                                      \
      ::mixprec::detail::throw_error<ExcType>(op, mixprec_check_os_.str()); \
    }                                                                    \
  } while (0)

/// An invariant of our own code; failing it is a mixprec bug (throws InternalError, never aborts).
#define MIXPREC_ASSERT(cond)                                                          \
  do {                                                                                \
    if (!(cond)) [[unlikely]] {                                                       \
      ::mixprec::detail::throw_error<::mixprec::InternalError>(                      \
          "internal", std::string("assertion failed: " #cond " at ") + __FILE__ + ":" + \
                          std::to_string(__LINE__) + " (a mixprec bug; please report it)"); \
    }                                                                                 \
  } while (0)
