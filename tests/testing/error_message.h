// The message of the error of type E a call throws, for tests that check what
// an error says; a placeholder that matches no expectation when it throws none.
#pragma once

#include <functional>
#include <string>

#include "braid/base/error.h"

namespace braid::test {

template <class E = Error>
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error of the expected type)";
}

}  // namespace braid::test
