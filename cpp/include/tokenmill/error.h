// The one exception type the core throws for bad input; the binding maps it to TokenmillError.
#pragma once

#include <stdexcept>
#include <string>

namespace tokenmill {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace tokenmill
