#include "tokenmill/unicode.h"

namespace tokenmill {

namespace {
#include "unicode_tables.inc"

}  // namespace

const char* uc::table_source() { return kUnicodeSource; }

uint8_t uc::table_flags(uint32_t cp) {
  if (cp >= 0x110000) return 0;
  return kUnicodeStage2[static_cast<std::size_t>(kUnicodeStage1[cp >> 8]) * 256 + (cp & 0xFF)];
}

Char decode_multibyte(std::string_view s, std::size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const std::size_t n = s.size() - i;
  auto cont = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]) & 0x3Fu; };
  auto is_cont = [&](std::size_t k) {
    return k < n && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  uint32_t cp = 0xFFFD;
  uint32_t len = 1;
  if (b0 >= 0xC2 && b0 < 0xE0 && is_cont(1)) {
    cp = ((b0 & 0x1Fu) << 6) | cont(1);
    len = 2;
  } else if (b0 >= 0xE0 && b0 < 0xF0 && is_cont(1) && is_cont(2)) {
    cp = ((b0 & 0x0Fu) << 12) | (cont(1) << 6) | cont(2);
    len = 3;
  } else if (b0 >= 0xF0 && b0 < 0xF5 && is_cont(1) && is_cont(2) && is_cont(3)) {
    cp = ((b0 & 0x07u) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3);
    len = 4;
  }
  if (len == 1) return {0xFFFD, 1, 0};
  return {cp, len, uc::flags(cp)};
}

}  // namespace tokenmill
