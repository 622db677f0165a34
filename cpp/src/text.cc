#include "tokenmill/text.h"

#include <algorithm>
#include <cstring>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#include <emmintrin.h>
#define TOKENMILL_TEXT_SSE2 1
#endif
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define TOKENMILL_TEXT_AVX2 1
#endif

namespace tokenmill {

namespace {

// Code units are converted a block at a time.
constexpr std::size_t kBlock = 16;
// The output buffer's room past the most the text's UTF-8 can take: a block's bytes are stored
// 16 at a time from wherever the output has got to.
constexpr std::size_t kSlack = 2 * kBlock;

// Writes the low bytes of in[0, 16) to bytes[0, 16) (those of units that are not ASCII are
// garbage) and returns a mask of the units that are not ASCII (bit k: in[k]).
template <typename Unit>
unsigned block_bytes(const Unit* in, char* bytes) {
#ifdef TOKENMILL_TEXT_SSE2
  static_assert(kBlock * sizeof(Unit) % 16 == 0, "whole vectors");
  constexpr std::size_t kVectors = kBlock * sizeof(Unit) / 16;
  __m128i v[kVectors];
  for (std::size_t k = 0; k < kVectors; ++k) {
    v[k] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in) + k);
  }
  const __m128i zero = _mm_setzero_si128();
  __m128i packed;
  __m128i ascii;  // 0xFF in byte k if in[k] is below 0x80
  if constexpr (sizeof(Unit) == 1) {
    packed = v[0];
    ascii = _mm_cmpgt_epi8(v[0], _mm_set1_epi8(-1));  // signed: the top bit clear
  } else if constexpr (sizeof(Unit) == 2) {
    const __m128i high = _mm_set1_epi16(static_cast<short>(0xFF80));
    packed = _mm_packus_epi16(v[0], v[1]);
    ascii = _mm_packs_epi16(_mm_cmpeq_epi16(_mm_and_si128(v[0], high), zero),
                            _mm_cmpeq_epi16(_mm_and_si128(v[1], high), zero));
  } else {
    const __m128i high = _mm_set1_epi32(static_cast<int>(0xFFFFFF80u));
    __m128i is[4];
    for (std::size_t k = 0; k < 4; ++k) is[k] = _mm_cmpeq_epi32(_mm_and_si128(v[k], high), zero);
    // Units below 0x80 pass both saturating packs unchanged.
    packed = _mm_packus_epi16(_mm_packs_epi32(v[0], v[1]), _mm_packs_epi32(v[2], v[3]));
    ascii = _mm_packs_epi16(_mm_packs_epi32(is[0], is[1]), _mm_packs_epi32(is[2], is[3]));
  }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(bytes), packed);
  return ~static_cast<unsigned>(_mm_movemask_epi8(ascii)) & 0xFFFFu;
#else
  unsigned other = 0;
  for (std::size_t k = 0; k < kBlock; ++k) {
    bytes[k] = static_cast<char>(in[k]);
    if (in[k] >= 0x80) other |= 1u << k;
  }
  return other;
#endif
}

// The lowest set bit of x (not 0).
inline unsigned lowest_bit(unsigned x) {
#if defined(__GNUC__) || defined(__clang__)
  return static_cast<unsigned>(__builtin_ctz(x));
#else
  unsigned k = 0;
  for (; (x & 1) == 0; x >>= 1) ++k;
  return k;
#endif
}
// Whether x has more than four bits set.
inline bool over_four_bits(unsigned x) {
  for (int k = 0; k < 4; ++k) x &= x - 1;  // clears the lowest set bit (none left: stays 0)
  return x != 0;
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

#ifdef TOKENMILL_TEXT_AVX2
// The run of ASCII units from in[0] as bytes at out, 32 units a step (AVX2, on processors that
// have it: asked once); returns how many units it wrote, a multiple of 32. The blocks below
// then take the rest, ASCII or not: on English kept as UCS-2 (a curly quote or a dash is
// enough), most of a text is such runs, and 16 units a step was 6% of a first pass.
template <typename Unit>
__attribute__((target("avx2"))) std::size_t ascii_run_avx2(const Unit* in, std::size_t n,
                                                           char* out) {
  static_assert(sizeof(Unit) <= 2, "Latin-1 or UCS-2 units");
  std::size_t i = 0;
  if constexpr (sizeof(Unit) == 1) {
    for (; n - i >= 32; i += 32) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
      if (_mm256_movemask_epi8(v) != 0) break;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
    }
  } else {
    const __m256i high = _mm256_set1_epi16(static_cast<short>(0xFF80));
    for (; n - i >= 32; i += 32) {
      const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i));
      const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 16));
      if (_mm256_testz_si256(_mm256_or_si256(a, b), high) == 0) break;
      // (the pack works within each 128-bit half: the 64-bit quarters are put back in order)
      const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi16(a, b), 0xD8);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
    }
  }
  return i;
}

bool have_avx2() {
  static const bool have = __builtin_cpu_supports("avx2") != 0;
  return have;
}
#endif

// in[0, n) as UTF-8 at out, which has room for the most that can take plus kSlack; returns the
// bytes written. A block of ASCII is its 16 bytes; in a block with a few other characters the
// ASCII between them is copied 16 bytes at a time (the next copy writes over the excess), and
// a block of mostly other characters (another script) goes character by character.
template <typename Unit>
std::size_t to_utf8(const Unit* in, std::size_t n, char* out) {
  char* const begin = out;
  std::size_t i = 0;
#ifdef TOKENMILL_TEXT_AVX2
  const bool wide = sizeof(Unit) <= 2 && have_avx2();
#endif
  for (; n - i >= kBlock; i += kBlock) {
#ifdef TOKENMILL_TEXT_AVX2
    if constexpr (sizeof(Unit) <= 2) {
      if (wide) {
        const std::size_t run = ascii_run_avx2(in + i, n - i, out);
        i += run;
        out += run;
        if (n - i < kBlock) break;
      }
    }
#endif
    char bytes[kBlock * 2] = {};
    unsigned other = block_bytes(in + i, bytes);
    std::memcpy(out, bytes, kBlock);
    if (other == 0) {
      out += kBlock;
      continue;
    }
    if (over_four_bits(other)) {
      for (std::size_t k = 0; k < kBlock; ++k) out = put_utf8(in[i + k], i + k, out);
      continue;
    }
    std::size_t at = 0;  // units of the block written
    for (; other != 0; other &= other - 1) {
      const std::size_t k = lowest_bit(other);
      std::memcpy(out, bytes + at, kBlock);  // the ASCII before unit k (and some excess)
      out = put_utf8(in[i + k], i + k, out + (k - at));
      at = k + 1;
    }
    std::memcpy(out, bytes + at, kBlock);
    out += kBlock - at;
  }
  for (; i < n; ++i) out = put_utf8(in[i], i, out);
  return static_cast<std::size_t>(out - begin);
}

}  // namespace

std::string_view utf8_view(const TextRef& text, std::string& buffer) {
  if (text.width == 0) return {static_cast<const char*>(text.data), text.length};
  // Latin-1 takes at most 2 bytes a character, UCS-2 3, UCS-4 4.
  const std::size_t need =
      text.length * (text.width == 1 ? 2 : text.width == 2 ? 3 : 4) + kSlack;
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

namespace {
// Room kept by each thread between texts.
constexpr std::size_t kScratchKeptBytes = std::size_t{1} << 18;
thread_local std::string scratch;
}  // namespace

std::string_view utf8_of(const TextRef& text) {
  // (UTF-8 already: the thread's scratch, a call to reach, is not needed)
  if (text.width == 0) return {static_cast<const char*>(text.data), text.length};
  return utf8_view(text, scratch);
}

void release_utf8_scratch() {
  if (scratch.size() > kScratchKeptBytes) std::string().swap(scratch);
}

}  // namespace tokenmill
