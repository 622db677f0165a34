// UTF-8 helpers shared by the core. Input from Python is valid UTF-8, but nothing here relies on
// it: an invalid lead or continuation byte is treated as a one-byte character, so no input can
// make a reader step past the end of its buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tokenmill {

// Byte length of the UTF-8 character starting at s[i] (1..4), clamped to the buffer.
inline std::size_t utf8_char_len(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  std::size_t n = 1;
  if (c >= 0xF0 && c < 0xF8) {
    n = 4;
  } else if (c >= 0xE0) {
    n = c < 0xF0 ? 3 : 1;
  } else if (c >= 0xC0) {
    n = 2;
  }
  if (i + n > s.size()) return 1;
  for (std::size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

// Number of characters (code points, with the clamping above) in s.
inline std::size_t utf8_count(std::string_view s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size(); i += utf8_char_len(s, i)) ++n;
  return n;
}

}  // namespace tokenmill
