// Text as Python holds it, read by the core without the GIL: a str's own buffer of code units
// (CPython keeps 1, 2 or 4 bytes a character, whichever the widest character needs), or UTF-8.
// Encoding threads turn code units into UTF-8 themselves, so a batch converts in parallel and no
// UTF-8 copy is left cached in every str (CPython's own conversion does both, under the GIL).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "tokenmill/error.h"

namespace tokenmill {

struct TextRef {
  const void* data = nullptr;
  std::size_t length = 0;  // code units (bytes, for UTF-8)
  unsigned width = 0;      // 0: UTF-8; 1: Latin-1; 2: UCS-2; 4: UCS-4 code units
};

// A str holding a lone surrogate, which has no UTF-8; the binding turns it into UnicodeError.
class SurrogateError : public Error {
 public:
  explicit SurrogateError(std::size_t at)
      : Error("a lone surrogate at character " + std::to_string(at) + " has no UTF-8") {}
};

// The text as UTF-8: its own bytes, or its code units converted into `buffer` (grown as
// needed). Throws SurrogateError.
std::string_view utf8_view(const TextRef& text, std::string& buffer);

// utf8_view into a buffer of the calling thread's, valid until its next call on this thread
// or release_utf8_scratch.
std::string_view utf8_of(const TextRef& text);

// Gives back the calling thread's buffer if a long text made it large (pool threads live as
// long as the process).
void release_utf8_scratch();

}  // namespace tokenmill
