#include "tokenmill/text.h"

#include <algorithm>

#if defined(__SSE2__)
#include <emmintrin.h>
#define TOKENMILL_TEXT_SSE2 1
#endif

namespace tokenmill {

namespace {

// Code units converted a block at a time while they are ASCII; a block holding anything else
// goes character by character.
constexpr std::size_t kBlock = 16;

// If in[0, 16) are all ASCII, writes them to out as bytes and returns true.
template <typename Unit>
bool ascii_block(const Unit* in, char* out) {
#ifdef TOKENMILL_TEXT_SSE2
  static_assert(kBlock * sizeof(Unit) % 16 == 0, "whole vectors");
  constexpr std::size_t kVectors = kBlock * sizeof(Unit) / 16;
  __m128i v[kVectors];
  __m128i any = _mm_setzero_si128();
  for (std::size_t k = 0; k < kVectors; ++k) {
    v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in) + k);
    any = _mm_or_si128(any, v[k]);
  }
  // Every byte of every unit below 0x80: no byte has its top bit, and (wider units) every
  // byte but the lowest is zero.
  __m128i high;
  if constexpr (sizeof(Unit) == 1) {
    high = any;
  } else if constexpr (sizeof(Unit) == 2) {
    high = _mm_and_si128(any, _mm_set1_epi16(static_cast<short>(0xFF80)));
  } else {
    high = _mm_and_si128(any, _mm_set1_epi32(static_cast<int>(0xFFFFFF80u)));
  }
  if constexpr (sizeof(Unit) == 1) {
    if (_mm_movemask_epi8(high) != 0) return false;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), v[0]);
  } else {
    if (_mm_movemask_epi8(_mm_cmpeq_epi8(high, _mm_setzero_si128())) != 0xFFFF) return false;
    if constexpr (sizeof(Unit) == 2) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(v[0], v[1]));
    } else {  // units below 0x80 survive both saturating packs unchanged
      const __m128i lo = _mm_packs_epi32(v[0], v[1]);
      const __m128i hi = _mm_packs_epi32(v[2], v[3]);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_packus_epi16(lo, hi));
    }
  }
  return true;
#else
  Unit any = 0;
  for (std::size_t k = 0; k < kBlock; ++k) any |= in[k];
  if (any >= 0x80) return false;
  for (std::size_t k = 0; k < kBlock; ++k) out[k] = static_cast<char>(in[k]);
  return true;
#endif
}

// One code point's UTF-8 at out; returns the end. Throws at a surrogate (position `at`).
inline char* put_utf8(uint32_t c, std::size_t at, char* out) {
  if (c < 0x80) {
    *out++ = static_cast<char>(c);
  } else if (c < 0x800) {
    *out++ = static_cast<char>(0xC0 | (c >> 6));
    *out++ = static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    if ((c & 0xF800) == 0xD800) throw SurrogateError(at);
    *out++ = static_cast<char>(0xE0 | (c >> 12));
    *out++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *out++ = static_cast<char>(0x80 | (c & 0x3F));
  } else {
    *out++ = static_cast<char>(0xF0 | ((c >> 18) & 0x07));
    *out++ = static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    *out++ = static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    *out++ = static_cast<char>(0x80 | (c & 0x3F));
  }
  return out;
}

// in[0, n) as UTF-8 at out (room for 4 bytes a unit, at most); returns the bytes written.
template <typename Unit>
std::size_t to_utf8(const Unit* in, std::size_t n, char* out) {
  char* const begin = out;
  std::size_t i = 0;
  while (i < n) {
    if (n - i >= kBlock && ascii_block(in + i, out)) {
      i += kBlock;
      out += kBlock;
      continue;
    }
    const std::size_t end = std::min(n, i + kBlock);
    for (; i < end; ++i) out = put_utf8(in[i], i, out);
  }
  return static_cast<std::size_t>(out - begin);
}

}  // namespace

std::string_view utf8_view(const TextRef& text, std::string& buffer) {
  if (text.width == 0) return {static_cast<const char*>(text.data), text.length};
  // Latin-1 takes at most 2 bytes a character, UCS-2 3, UCS-4 4.
  const std::size_t need = text.length * (text.width == 1 ? 2 : text.width == 2 ? 3 : 4);
  if (buffer.size() < need) buffer.resize(need);
  char* out = buffer.data();
  std::size_t size = 0;
  switch (text.width) {
    case 1:
      size = to_utf8(static_cast<const uint8_t*>(text.data), text.length, out);
      break;
    case 2:
      size = to_utf8(static_cast<const uint16_t*>(text.data), text.length, out);
      break;
    case 4:
      size = to_utf8(static_cast<const uint32_t*>(text.data), text.length, out);
      break;
    default:
      throw Error("a text's code units are 1, 2 or 4 bytes wide");
  }
  return {buffer.data(), size};
}

std::string_view utf8_of(const TextRef& text) {
  thread_local std::string buffer;
  // A long text's room is given back at the next text that needs a fraction of it.
  constexpr std::size_t kKept = std::size_t{1} << 18;
  if (buffer.size() > kKept && text.length * 4 <= kKept) std::string().swap(buffer);
  return utf8_view(text, buffer);
}

}  // namespace tokenmill
