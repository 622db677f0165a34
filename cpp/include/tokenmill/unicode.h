// Unicode character classes of the GPT-family pre-tokenizer patterns, from tables generated at
// build time (tools/gen_unicode_tables.py reads them from the `regex` module, so the scanners
// classify every code point exactly as that module does).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tokenmill {
namespace uc {

enum : uint8_t {
  kLetter = 1,     // \p{L}
  kNumber = 2,     // \p{N}
  kSpace = 4,      // \s
  kUpperish = 8,   // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerish = 16,  // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
};

// Flags of a code point >= 128 (0 beyond U+10FFFF): the generated two-stage table.
uint8_t table_flags(uint32_t cp);

// Where the tables came from, e.g. "regex 2026.11.19": the scanners split as that release does.
const char* table_source();

// ASCII classes, so the common bytes need no table walk.
struct AsciiTable {
  uint8_t flags[128];
  constexpr AsciiTable() : flags() {
    for (int c = 'a'; c <= 'z'; ++c) flags[c] = kLetter | kLowerish;
    for (int c = 'A'; c <= 'Z'; ++c) flags[c] = kLetter | kUpperish;
    for (int c = '0'; c <= '9'; ++c) flags[c] = kNumber;
    for (int c = 9; c <= 13; ++c) flags[c] = kSpace;  // \t \n \v \f \r
    flags[' '] = kSpace;
    // 0x1c-0x1f are not \s in the regex module (they are for Python's str.isspace)
  }
};
inline constexpr AsciiTable kAscii{};

inline uint8_t flags(uint32_t cp) { return cp < 128 ? kAscii.flags[cp] : table_flags(cp); }

}  // namespace uc

// One decoded character: its code point, byte length and class flags. Invalid UTF-8 decodes
// as a one-byte character U+FFFD with no flags (such input never comes from Python text).
struct Char {
  uint32_t cp;
  uint32_t len;
  uint8_t flags;
};

Char decode_multibyte(std::string_view s, std::size_t i);

// Inline for the ASCII case, which is most of the bytes of most text.
inline Char char_at(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1, uc::kAscii.flags[b0]};
  return decode_multibyte(s, i);
}

}  // namespace tokenmill
