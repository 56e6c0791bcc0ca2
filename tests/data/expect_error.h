#pragma once
// The data tests' check of an error message: the call must throw an E (a ValueError unless
// said) whose message names every one of `parts` (the file, the line, the flag, what to do).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "mixprec/core/error.h"

namespace mixprec::testing {

template <class E = ValueError, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception thrown; expected one mentioning " << parts.front();
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& part : parts) {
      EXPECT_NE(msg.find(part), std::string::npos) << "message lacks \"" << part << "\": " << msg;
    }
  }
}

template <class F>
void expect_value_error(F&& f, const std::vector<std::string>& parts) {
  expect_error<ValueError>(std::forward<F>(f), parts);
}

}  // namespace mixprec::testing
