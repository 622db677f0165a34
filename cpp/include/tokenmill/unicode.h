// Unicode character classes of the GPT-family pre-tokenizer patterns, from tables generated at
// build time (tools/gen_unicode_tables.py reads them from the `regex` module, so the scanners
// classify every code point as that module does, up to Unicode 16.0: the Unicode of tiktoken
// and tokenizers).
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
  kWord = 32,      // \w
};

// The generated two-stage table (unicode.cc): a block index per 256 code points, then a flags
// byte per code point of each distinct block. Inline lookups: the scanners spend most of
// their time here on non-Latin text.
extern const uint16_t kUnicodeStage1[0x110000 / 256];
extern const uint8_t kUnicodeStage2[];

// Flags of a code point >= 128 (0 beyond U+10FFFF).
inline uint8_t table_flags(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return kUnicodeStage2[static_cast<std::size_t>(kUnicodeStage1[cp >> 8]) * 256 + (cp & 0xFF)];
}

// Where the tables came from, e.g. "regex 2026.11.19, Unicode 16.0.0": the scanners split as
// that release does, with the code points Unicode 16.0 leaves unassigned of no class.
const char* table_source();

// The runs [first, last] of code points that release gives a class and the tables do not
// (assigned after Unicode 16.0), in order: count runs, 2 * count values.
const uint32_t* newer_ranges(std::size_t& count);

// ASCII classes, so the common bytes need no table walk.
struct AsciiTable {
  uint8_t flags[128];
  constexpr AsciiTable() : flags() {
    for (int c = 'a'; c <= 'z'; ++c) flags[c] = kLetter | kLowerish | kWord;
    for (int c = 'A'; c <= 'Z'; ++c) flags[c] = kLetter | kUpperish | kWord;
    for (int c = '0'; c <= '9'; ++c) flags[c] = kNumber | kWord;
    flags['_'] = kWord;
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

#if defined(__GNUC__) || defined(__clang__)
#define TOKENMILL_ALWAYS_INLINE inline __attribute__((always_inline))
#elif defined(_MSC_VER)
#define TOKENMILL_ALWAYS_INLINE __forceinline
#else
#define TOKENMILL_ALWAYS_INLINE inline
#endif

inline Char decode_multibyte(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const std::size_t n = s.size() - i;
  auto cont = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]) & 0x3Fu; };
  auto is_cont = [&](std::size_t k) {
    return k < n && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  uint32_t cp = 0;
  uint32_t len = 0;
  if (b0 >= 0xE0 && b0 < 0xF0 && is_cont(1) && is_cont(2)) {  // first: CJK and most scripts
    cp = ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    len = 3;
  } else if (b0 >= 0xC2 && b0 < 0xE0 && is_cont(1)) {
    cp = ((b0 & 0x1Fu) << 6) | cont(1);
    len = 2;
  } else if (b0 >= 0xF0 && b0 < 0xF5 && is_cont(1) && is_cont(2) && is_cont(3)) {
    cp = ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    len = 4;
  } else {
    return {0xFFFD, 1, 0};
  }
  return {cp, len, uc::table_flags(cp)};
}

// Inline for the ASCII case, which is most of the bytes of most text (GCC left it a call from
// the scanners, a fifth of their time on English).
TOKENMILL_ALWAYS_INLINE Char char_at(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {b0, 1, uc::kAscii.flags[b0]};
  return decode_multibyte(s, i);
}

}  // namespace tokenmill
