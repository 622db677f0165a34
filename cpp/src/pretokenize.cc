#include "tokenmill/pretokenize.h"

#include "tokenmill/unicode.h"

#include <cstring>

#if defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))  // __builtin_ctz below
#include <emmintrin.h>
#define TOKENMILL_SSE2 1
#endif

namespace tokenmill {

namespace {

using std::size_t;

// The scanners read text through one of two views: UTF-8 bytes (std::string_view; offsets are
// byte offsets) or fixed-width code points, as Python keeps a str (Units<T>: offsets are
// character offsets, and no decoding is needed).
template <typename T>
struct Units {
  const T* data;
  size_t n;
  size_t size() const { return n; }
  uint32_t operator[](size_t i) const { return data[i]; }
};

template <typename T>
inline Char char_at(const Units<T>& s, size_t i) {
  const uint32_t cp = s.data[i];
  return {cp, 1, uc::flags(cp)};
}
using tokenmill::char_at;  // the UTF-8 reader, overloaded beside the one above

constexpr uint8_t kLN = uc::kLetter | uc::kNumber;

bool is_letter(const Char& c) { return (c.flags & uc::kLetter) != 0; }
bool is_number(const Char& c) { return (c.flags & uc::kNumber) != 0; }
bool is_space(const Char& c) { return (c.flags & uc::kSpace) != 0; }
bool is_newline(const Char& c) { return c.cp == '\r' || c.cp == '\n'; }
// [^\s\p{L}\p{N}]
bool is_other(const Char& c) { return (c.flags & (kLN | uc::kSpace)) == 0; }
// [^\r\n\p{L}\p{N}]: the optional one-character prefix of a word in cl100k and o200k
bool is_prefix(const Char& c) { return (c.flags & kLN) == 0 && !is_newline(c); }
bool is_word(const Char& c) { return (c.flags & uc::kWord) != 0; }
bool is_other_word(const Char& c) { return (c.flags & (uc::kWord | uc::kSpace)) == 0; }
bool is_upperish(const Char& c) { return (c.flags & uc::kUpperish) != 0; }
bool is_lowerish(const Char& c) { return (c.flags & uc::kLowerish) != 0; }

// End of the run of characters satisfying pred that starts at i (i itself if none).
template <typename S, typename Pred>
size_t run(const S& s, size_t i, Pred pred) {
  while (i < s.size()) {
    const Char c = char_at(s, i);
    if (!pred(c)) break;
    i += c.len;
  }
  return i;
}

// A whitespace run [i, end): where it ends, where its last character starts, and where the
// last \r or \n in it ends (npos if none).
struct SpaceRun {
  size_t end;
  size_t last_start;
  size_t after_newline;
};

constexpr size_t npos = static_cast<size_t>(-1);

template <typename S>
SpaceRun space_run(const S& s, size_t i) {
  SpaceRun r{i, i, npos};
  while (r.end < s.size()) {
    const Char c = char_at(s, r.end);
    if (!is_space(c)) break;
    r.last_start = r.end;
    r.end += c.len;
    if (is_newline(c)) r.after_newline = r.end;
  }
  return r;
}

char ascii_lower(uint32_t cp) {
  return cp < 128 ? static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + 32 : cp) : '\0';
}

// After an apostrophe at i: the end of a contraction 's 't 're 've 'm 'll 'd, or npos.
// With ignore_case, (?i) as the regex module applies it: ASCII case, and U+017F (long s)
// folds to s.
template <typename S>
size_t contraction(const S& s, size_t i, bool ignore_case) {
  if (i >= s.size() || s[i] != '\'' || i + 1 >= s.size()) return npos;
  const Char a = char_at(s, i + 1);
  char x = ignore_case ? ascii_lower(a.cp) : (a.cp < 128 ? static_cast<char>(a.cp) : '\0');
  if (ignore_case && a.cp == 0x17F) x = 's';
  if (x == 's' || x == 't' || x == 'm' || x == 'd') return i + 1 + a.len;
  if (i + 2 >= s.size() || a.len != 1) return npos;
  const Char b = char_at(s, i + 2);
  const char y = ignore_case ? ascii_lower(b.cp) : (b.cp < 128 ? static_cast<char>(b.cp) : '\0');
  if ((x == 'r' && y == 'e') || (x == 'v' && y == 'e') || (x == 'l' && y == 'l')) return i + 3;
  return npos;
}

// Whitespace at i once the word and punctuation alternatives failed: \s+(?!\S) then \s+.
size_t trailing_space(const SpaceRun& r, size_t i, size_t n) {
  if (r.end == n) return r.end;                  // nothing follows: (?!\S) holds at the end
  if (r.last_start > i) return r.last_start;     // give the last space to the next piece
  return r.end;                                  // a single space before a non-space
}

// \p{N}{1,3} at i.
template <typename S>
size_t up_to_three_numbers(const S& s, size_t i) {
  for (int count = 0; count < 3 && i < s.size(); ++count) {
    const Char d = char_at(s, i);
    if (!is_number(d)) break;
    i += d.len;
  }
  return i;
}

// Where " ?[^\s\p{L}\p{N}]+" starts its run of others at i (after the optional space), or npos.
template <typename S>
size_t other_run_start(const S& s, size_t i, const Char& c) {
  if (is_other(c)) return i;
  if (c.cp == ' ' && i + 1 < s.size() && is_other(char_at(s, i + 1))) return i + 1;
  return npos;
}

// A code unit as a number on either view (a UTF-8 byte, 0..255, or a code point).
inline uint32_t unit(std::string_view s, size_t i) { return static_cast<unsigned char>(s[i]); }
template <typename T>
uint32_t unit(const Units<T>& s, size_t i) {
  return s.data[i];
}

// ASCII tests on a code unit.
inline bool letter_ascii(uint32_t u) { return (u | 0x20u) - 'a' < 26u && u < 0x80; }
inline bool digit_ascii(uint32_t u) { return u - '0' < 10u; }

// Runs of ASCII code units from i, where each ends: units u with (u | fold) - lo < count.
// [A-Z]: fold 0, lo 'A'; [a-z]: fold 0, lo 'a'; [A-Za-z]: fold 0x20, lo 'a' (folding maps no
// other unit into a-z).
template <typename S>
size_t ascii_run(const S& s, size_t i, uint32_t fold, uint32_t lo, uint32_t count) {
  while (i < s.size() && ((unit(s, i) | fold) - lo < count) && unit(s, i) < 0x80) ++i;
  return i;
}
// On bytes, sixteen a step: a word's end is found without a branch per letter (the one
// mispredicted at every word's end was most of the scanner's time on English). For UTF-8 and
// for a str kept one byte a character (Latin-1: a byte of 0x80 and over is a character of its
// own, never an ASCII letter, so it ends a run there as a UTF-8 lead byte does).
inline size_t ascii_run_bytes(const unsigned char* p, size_t n, size_t i, uint32_t fold,
                              uint32_t lo, uint32_t count) {
#ifdef TOKENMILL_SSE2
  // u in [lo, lo + count) as bytes: (u | fold) - lo, flipped to signed, below count - 128.
  const __m128i vfold = _mm_set1_epi8(static_cast<char>(fold));
  const __m128i vlo = _mm_set1_epi8(static_cast<char>(lo));
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  const __m128i limit = _mm_set1_epi8(static_cast<char>(count ^ 0x80u));
  while (i + 16 <= n) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    const __m128i x = _mm_xor_si128(_mm_sub_epi8(_mm_or_si128(v, vfold), vlo), flip);
    const auto in = static_cast<unsigned>(_mm_movemask_epi8(_mm_cmplt_epi8(x, limit)));
    if (in != 0xFFFFu) return i + static_cast<size_t>(__builtin_ctz(~in));
    i += 16;
  }
#endif
  while (i < n && ((p[i] | fold) - lo < count)) ++i;
  return i;
}
inline size_t ascii_run(std::string_view s, size_t i, uint32_t fold, uint32_t lo, uint32_t count) {
  return ascii_run_bytes(reinterpret_cast<const unsigned char*>(s.data()), s.size(), i, fold, lo,
                         count);
}
inline size_t ascii_run(const Units<uint8_t>& s, size_t i, uint32_t fold, uint32_t lo,
                        uint32_t count) {
  return ascii_run_bytes(s.data, s.n, i, fold, lo, count);
}

// On UTF-8 text from b: the end of the run of three-byte characters (the scripts of most of
// Asia, CJK among them) whose classes hold all of `need`, read without the general decoder (a
// branch on each character's length, a bounds check on each byte); `marked` is set past each
// one whose classes hold `mark` too. (The same code points and classes as char_at: the
// general path takes over where the run stops.) On code points, the run is empty.
inline size_t three_byte_run(std::string_view s, size_t b, uint8_t need, uint8_t mark,
                             size_t& marked) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  while (s.size() - b >= 3) {
    const uint32_t c0 = p[b];
    const uint32_t c1 = p[b + 1];
    const uint32_t c2 = p[b + 2];
    // (one branch: a lead byte 1110xxxx, then two 10xxxxxx)
    if ((((c0 ^ 0xE0u) & 0xF0u) | ((c1 ^ 0x80u) & 0xC0u) | ((c2 ^ 0x80u) & 0xC0u)) != 0) break;
    const uint32_t cp = (c0 & 0x0Fu) << 12 | (c1 & 0x3Fu) << 6 | (c2 & 0x3Fu);
    const uint8_t f =
        uc::kUnicodeStage2[std::size_t{uc::kUnicodeStage1[cp >> 8]} * 256 + (cp & 0xFF)];
    if ((f & need) != need) break;
    b += 3;
    if ((f & mark) != 0) marked = b;
  }
  return b;
}
template <typename S>
size_t three_byte_run(const S&, size_t b, uint8_t, uint8_t, size_t&) {
  return b;
}

// \p{L}+ from i, ASCII letters first without the class table (most words are all ASCII), then
// three-byte letters.
template <typename S>
size_t letters(const S& s, size_t i) {
  i = ascii_run(s, i, 0x20, 'a', 26);
  if (i == s.size() || unit(s, i) < 0x80) return i;
  size_t unused = 0;
  i = three_byte_run(s, i, uc::kLetter, 0, unused);
  return run(s, i, is_letter);
}

template <typename S>
size_t gpt2(const S& s, size_t i) {
  const size_t n = s.size();
  const size_t k = contraction(s, i, false);
  if (k != npos) return k;
  Char c = char_at(s, i);
  size_t start = i;
  if (c.cp == ' ' && i + 1 < n) {
    const Char d = char_at(s, i + 1);
    if (!is_space(d)) {  // " ?" takes the space when a letter, number or other follows
      start = i + 1;
      c = d;
    }
  }
  if (is_letter(c)) return letters(s, start);
  if (is_number(c)) return run(s, start, is_number);
  if (is_other(c)) return run(s, start, is_other);
  return trailing_space(space_run(s, i), i, n);
}

// \p{N}{1,3} at an ASCII digit i: ASCII digits alone decide it unless a non-ASCII character
// follows fewer than three of them.
template <typename S>
size_t digits_at(const S& s, size_t i) {
  size_t e = i + 1;
  while (e < s.size() && e < i + 3 && digit_ascii(unit(s, e))) ++e;
  if (e == i + 3 || e == s.size() || unit(s, e) < 0x80) return e;
  return up_to_three_numbers(s, i);
}

// An ASCII unit of [^\s\p{L}\p{N}] (punctuation, symbols, controls other than spaces).
inline bool other_ascii(uint32_t u) { return u < 0x80 && is_other({u, 1, uc::kAscii.flags[u]}); }

// " ?[^\s\p{L}\p{N}]+" followed by a run of `tail` units, decided on ASCII alone: at i an other
// (or a space and then an other) that no word alternative can take, the character after it
// being ASCII and not a letter. npos when that does not hold or the run of others stops at a
// non-ASCII character (which may continue it): the general path decides then. Most pieces of
// punctuation in English and code end here instead of going through every alternative.
template <typename S, typename Tail>
size_t ascii_other_run(const S& s, size_t i, uint32_t u, Tail tail) {
  const size_t n = s.size();
  size_t e = other_ascii(u) ? i : npos;
  if (e == npos && u == ' ' && i + 1 < n && other_ascii(unit(s, i + 1))) e = i + 1;
  if (e == npos) return npos;
  if (i + 1 < n && (unit(s, i + 1) >= 0x80 || letter_ascii(unit(s, i + 1)))) return npos;
  while (e < n && other_ascii(unit(s, e))) ++e;
  if (e < n && unit(s, e) >= 0x80) return npos;
  while (e < n && tail(unit(s, e))) ++e;
  return e;
}

template <typename S>
size_t cl100k(const S& s, size_t i) {
  const size_t n = s.size();
  const uint32_t u = unit(s, i);
  if (u < 0x80 && u != '\'') {  // ASCII, no contraction: a word (after its prefix) or digits
    size_t j = i;
    // [^\r\n\p{L}\p{N}] among ASCII: neither letter, digit, \r nor \n
    if (!letter_ascii(u) && !digit_ascii(u) && u != '\r' && u != '\n' && i + 1 < n) ++j;
    if (letter_ascii(unit(s, j))) return letters(s, j);
    if (digit_ascii(u)) return digits_at(s, i);
    const size_t e =
        ascii_other_run(s, i, u, [](uint32_t v) { return v == '\r' || v == '\n'; });
    if (e != npos) return e;
  }
  const size_t k = contraction(s, i, true);
  if (k != npos) return k;
  const Char c = char_at(s, i);
  if (is_letter(c)) return letters(s, i);
  if (is_prefix(c) && i + c.len < n && is_letter(char_at(s, i + c.len))) {
    return letters(s, i + c.len);
  }
  if (is_number(c)) return up_to_three_numbers(s, i);
  const size_t start = other_run_start(s, i, c);
  if (start != npos) return run(s, run(s, start, is_other), is_newline);
  const SpaceRun r = space_run(s, i);
  if (r.end == n) return n;                               // \s++$
  if (r.after_newline != npos) return r.after_newline;   // \s*[\r\n]
  return trailing_space(r, i, n);
}

// o200k's words: [UPPER]*[LOWER]+ (first) or [UPPER]+[LOWER]* (second) from i, as the regex
// engine backtracks them; npos if the form does not match there.
template <typename S>
size_t upper_then_lower(const S& s, size_t i) {
  // [UPPER]* gives characters back until [LOWER]+ can take one: Lm, Lo and M are in both
  // classes, so if no lowercase follows the run, the last such character of it ends the match
  // (noted on the way: a run of Han is read once, not twice).
  size_t b = i;
  size_t end = npos;
  while (b < s.size()) {
    b = three_byte_run(s, b, uc::kUpperish, uc::kLowerish, end);
    if (b == s.size()) break;
    const Char d = char_at(s, b);
    if (!is_upperish(d)) break;
    b += d.len;
    if (is_lowerish(d)) end = b;
  }
  if (b < s.size() && is_lowerish(char_at(s, b))) return run(s, b, is_lowerish);
  return end;
}

template <typename S>
size_t upper_at_least_one(const S& s, size_t i) {
  if (i >= s.size() || !is_upperish(char_at(s, i))) return npos;
  return run(s, run(s, i, is_upperish), is_lowerish);
}

// o200k's two word forms from j when the word is ASCII: [A-Z]*[a-z]+ and [A-Z]+[a-z]* both end
// where the uppercase-then-lowercase run ends. npos when there is no ASCII letter at j, or the
// run stops at a non-ASCII character (a letter or mark there changes the match: the slow path
// decides).
template <typename S>
size_t ascii_word(const S& s, size_t j) {
  if (j >= s.size()) return npos;
  const size_t k = ascii_run(s, ascii_run(s, j, 0, 'A', 26), 0, 'a', 26);
  if (k == j || (k < s.size() && unit(s, k) >= 0x80)) return npos;
  return k;
}

template <typename S>
size_t o200k(const S& s, size_t i) {
  const size_t n = s.size();
  const Char c = char_at(s, i);
  if (digit_ascii(c.cp)) return digits_at(s, i);  // no word form starts at a number
  const bool prefix = is_prefix(c);
  if (c.cp < 0x80) {  // the common case: an ASCII word, with or without its one-character prefix
    const size_t end = ascii_word(s, prefix ? i + 1 : i);
    if (end != npos) {
      const size_t k = contraction(s, end, true);
      return k != npos ? k : end;
    }
    const size_t e = ascii_other_run(s, i, c.cp,
                                     [](uint32_t v) { return v == '\r' || v == '\n' || v == '/'; });
    if (e != npos) return e;
  }
  // The optional prefix is tried taken, then not, before the next alternative is tried.
  for (auto word : {upper_then_lower<S>, upper_at_least_one<S>}) {
    size_t end = prefix ? word(s, i + c.len) : npos;
    if (end == npos) end = word(s, i);
    if (end != npos) {
      const size_t k = contraction(s, end, true);
      return k != npos ? k : end;
    }
  }
  if (is_number(c)) return up_to_three_numbers(s, i);
  const size_t start = other_run_start(s, i, c);
  if (start != npos) {
    return run(s, run(s, start, is_other), [](const Char& d) { return is_newline(d) || d.cp == '/'; });
  }
  const SpaceRun r = space_run(s, i);
  if (r.after_newline != npos) return r.after_newline;   // \s*[\r\n]+
  return trailing_space(r, i, n);
}

// \w+ | [^\w\s]+ | and the whitespace between them as a piece of its own.
template <typename S>
size_t words(const S& s, size_t i) {
  const Char c = char_at(s, i);
  if (is_word(c)) return run(s, i, is_word);
  if (is_space(c)) return run(s, i, is_space);
  return run(s, i, is_other_word);
}

// fn(scanner) with the scanner of `pattern`: (text, i) -> where the piece from i ends.
template <typename S, typename Fn>
auto with_scanner(SplitPattern pattern, Fn fn) {
  // (Lambdas, not function pointers: each scanner is its own type, so fn's loop inlines it.)
  switch (pattern) {
    case SplitPattern::kGPT2:
      return fn([](const S& s, size_t i) { return gpt2(s, i); });
    case SplitPattern::kCL100K:
      return fn([](const S& s, size_t i) { return cl100k(s, i); });
    case SplitPattern::kO200K:
      return fn([](const S& s, size_t i) { return o200k(s, i); });
    case SplitPattern::kWords:
      break;
  }
  return fn([](const S& s, size_t i) { return words(s, i); });
}

// Every character matches some alternative; this guard only keeps a scanner bug from looping
// forever.
template <typename S>
size_t past(const S& s, size_t i, size_t end) {
  return end > i ? end : i + char_at(s, i).len;
}

// The whole text, the scanner chosen once (its calls inline into this loop).
template <typename S>
void scan_text(SplitPattern pattern, const S& s, std::vector<uint32_t>& ends) {
  with_scanner<S>(pattern, [&](auto scan) {
    for (size_t i = 0; i < s.size();) {
      i = past(s, i, scan(s, i));
      ends.push_back(static_cast<uint32_t>(i));
    }
  });
}

#ifdef TOKENMILL_SSE2
// Sixty-four bytes as bit masks (bit j for byte j): letters (ASCII ones, both bytes of each
// Latin-1 letter, U+00C0 to U+00FF but the signs U+00D7 and U+00F7, and all bytes of the
// other letters of two bytes and of some of three, up to the first character that is not one
// of these), ASCII digits, uppercase letters (of those), spaces (' ' only), tabs,
// punctuation (printable ASCII punctuation but the apostrophe, which may start a contraction,
// and the three bytes of each quote or dash below), \r and \n, the first bytes of those
// quotes and dashes, and the other bytes of 0x80 and over.
struct Block64 {
  uint64_t letter;
  uint64_t digit;
  uint64_t upper;
  uint64_t space;
  uint64_t tab;
  uint64_t punct;
  uint64_t newline;
  uint64_t quote;
  uint64_t high;
};

// A letter's class for the blocks, from the scanners' flags: kClassLetter for \p{L}; with
// kClassUpper, one of o200k_base's upper class only (\p{Lu}, \p{Lt}); with kClassCaseless, of
// both its classes (\p{Lm}, \p{Lo}). A letter with neither is lowercase (\p{Ll}).
enum : uint8_t { kClassLetter = 1, kClassUpper = 2, kClassCaseless = 4 };
inline uint8_t letter_class(uint8_t flags) {
  if ((flags & uc::kLetter) == 0) return 0;
  const bool upperish = (flags & uc::kUpperish) != 0;
  const bool lowerish = (flags & uc::kLowerish) != 0;
  return static_cast<uint8_t>(kClassLetter | (upperish && !lowerish ? kClassUpper : 0) |
                              (upperish && lowerish ? kClassCaseless : 0));
}
// The class of every character of two bytes in UTF-8 (U+0080 to U+07FF), by code point:
// Cyrillic, Greek, Armenian, Hebrew, Arabic, the Latin past Latin-1 (Turkish, Polish, Czech).
struct TwoByteLetters {
  uint8_t of[0x800];
  TwoByteLetters() : of() {
    for (uint32_t cp = 0x80; cp < 0x800; ++cp) of[cp] = letter_class(uc::flags(cp));
  }
};
const TwoByteLetters two_byte_letters;

// The third byte of E2 80 xx for the punctuation of English prose beyond ASCII, a character
// of [^\s\p{L}\p{N}] each: en and em dashes (U+2013, U+2014), single and double curly quotes
// (U+2018, U+2019, U+201C, U+201D) and the ellipsis (U+2026). Before, each took the general
// path, and with it the piece before it and the one after: a tenth of English's pieces.
inline bool prose_punctuation(unsigned char third) {
  constexpr uint32_t kThirds = 1u << (0x93 - 0x93) | 1u << (0x94 - 0x93) | 1u << (0x98 - 0x93) |
                               1u << (0x99 - 0x93) | 1u << (0x9C - 0x93) | 1u << (0x9D - 0x93) |
                               1u << (0xA6 - 0x93);
  const unsigned at = third - 0x93u;
  return at < 32 && ((kThirds >> at) & 1) != 0;
}

// split_case: the pattern is o200k_base's, whose words split where case changes; there a
// letter of neither case followed by an uppercase one is left to the general path.
template <bool split_case>
inline Block64 classify64(const unsigned char* p) {
  // (u - lo) flipped to signed below count - 128: u in [lo, lo + count), as in ascii_run_bytes.
  const __m128i flip = _mm_set1_epi8(static_cast<char>(0x80));
  const __m128i fold = _mm_set1_epi8(0x20);
  const __m128i a = _mm_set1_epi8('a');
  const __m128i big_a = _mm_set1_epi8('A');
  const __m128i limit = _mm_set1_epi8(static_cast<char>(26 ^ 0x80));
  const __m128i space = _mm_set1_epi8(' ');
  const __m128i tab = _mm_set1_epi8('\t');
  const __m128i bang = _mm_set1_epi8('!');
  const __m128i printable = _mm_set1_epi8(static_cast<char>(('~' - '!' + 1) ^ 0x80));
  const __m128i zero = _mm_set1_epi8('0');
  const __m128i ten = _mm_set1_epi8(static_cast<char>(10 ^ 0x80));
  const __m128i apostrophe = _mm_set1_epi8('\'');
  const __m128i cr = _mm_set1_epi8('\r');
  const __m128i lf = _mm_set1_epi8('\n');
  auto mask = [](__m128i m) {
    return static_cast<uint64_t>(static_cast<unsigned>(_mm_movemask_epi8(m)));
  };
  Block64 b{0, 0, 0, 0, 0, 0, 0, 0, 0};
  __m128i any_digit = _mm_setzero_si128();
  __m128i any_tab = _mm_setzero_si128();
  for (int k = 0; k < 4; ++k) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
    const __m128i letter =
        _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(_mm_or_si128(v, fold), a), flip), limit);
    const __m128i upper = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, big_a), flip), limit);
    const __m128i shown = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, bang), flip), printable);
    const __m128i digit = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, zero), flip), ten);
    const __m128i not_punct =
        _mm_or_si128(_mm_or_si128(letter, digit), _mm_cmpeq_epi8(v, apostrophe));
    const int shift = 16 * k;
    b.letter |= mask(letter) << shift;
    b.upper |= mask(upper) << shift;
    b.space |= mask(_mm_cmpeq_epi8(v, space)) << shift;
    b.punct |= mask(_mm_andnot_si128(not_punct, shown)) << shift;
    b.newline |= mask(_mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, lf))) << shift;
    b.high |= mask(v) << shift;
    any_digit = _mm_or_si128(any_digit, digit);
    any_tab = _mm_or_si128(any_tab, _mm_cmpeq_epi8(v, tab));
  }
  if (_mm_movemask_epi8(any_digit) != 0) {  // (few blocks of English)
    for (int k = 0; k < 4; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
      const __m128i digit = _mm_cmplt_epi8(_mm_xor_si128(_mm_sub_epi8(v, zero), flip), ten);
      b.digit |= mask(digit) << (16 * k);
    }
  }
  if (_mm_movemask_epi8(any_tab) != 0) {  // (no block of English, some of code)
    for (int k = 0; k < 4; ++k) {
      const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16 * k));
      b.tab |= mask(_mm_cmpeq_epi8(v, tab)) << (16 * k);
    }
  }
  if (b.high == 0) return b;  // (most blocks of English and code)
  // Each E2 80 xx of prose punctuation wholly in the block (its first byte at 61 at most) is
  // punctuation, three bytes of it. Each Latin-1 letter wholly in the block (C3 80 to C3 BF,
  // its first byte at 62 at most) is a letter, two bytes of it, and uppercase up to C3 9E.
  // (The accented words of French, Spanish, Portuguese or German took the general path
  // before, one character at a time, and with them the pieces before and after them.)
  const __m128i e2 = _mm_set1_epi8(static_cast<char>(0xE2));
  const __m128i c3 = _mm_set1_epi8(static_cast<char>(0xC3));
  const __m128i past_continuation = _mm_set1_epi8(static_cast<char>(0xC0));  // (signed)
  const __m128i past_upper = _mm_set1_epi8(static_cast<char>(0x9F));
  const __m128i times = _mm_set1_epi8(static_cast<char>(0x97));   // U+00D7
  const __m128i divide = _mm_set1_epi8(static_cast<char>(0xB7));  // U+00F7
  uint64_t lead = 0;
  uint64_t latin_lead = 0;
  uint64_t second = 0;  // second bytes of a Latin-1 letter
  uint64_t second_upper = 0;
  for (int k = 0; k < 4; ++k) {
    const int shift = 16 * k;
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + shift));
    lead |= mask(_mm_cmpeq_epi8(v, e2)) << shift;
    latin_lead |= mask(_mm_cmpeq_epi8(v, c3)) << shift;
    // (0x80 to 0xBF are the signed bytes below 0xC0)
    const __m128i is_times = _mm_cmpeq_epi8(v, times);
    const __m128i sign = _mm_or_si128(is_times, _mm_cmpeq_epi8(v, divide));
    second |= mask(_mm_andnot_si128(sign, _mm_cmplt_epi8(v, past_continuation))) << shift;
    second_upper |= mask(_mm_andnot_si128(is_times, _mm_cmplt_epi8(v, past_upper))) << shift;
  }
  const uint64_t latin = latin_lead & (second >> 1);
  const uint64_t latin_upper = latin_lead & (second_upper >> 1);
  b.letter |= latin | latin << 1;
  b.upper |= latin_upper | latin_upper << 1;
  b.high &= ~(latin | latin << 1);
  lead &= (uint64_t{1} << 62) - 1;
  while (lead != 0) {
    const unsigned j = static_cast<unsigned>(__builtin_ctzll(lead));
    lead &= lead - 1;
    if (p[j + 1] == 0x80 && prose_punctuation(p[j + 2])) b.quote |= uint64_t{1} << j;
  }
  const uint64_t three = b.quote | b.quote << 1 | b.quote << 2;
  b.punct |= three;
  b.high &= ~three;
  // Then the other letters: from the first byte still unclassified on, a character at a time,
  // up to the first that is not a letter here (the block's pieces end before it, so what
  // follows it is not needed). English and French, whose blocks have no byte left
  // unclassified by now, pay nothing for it. Two bytes (U+0080 to U+07FF) by two_byte_letters
  // (a Latin-1 sign, all the vector step above leaves of C3 xx, is not a letter there; that
  // step stays, as French read 3-8% slower with its letters taken here one by one); three
  // bytes from U+1200 to U+1FFF (Ethiopic, the Latin of Vietnamese and Yoruba, Greek with
  // accents) and from U+A000 to U+DFFF (Hangul) by the scanners' own table. Not the scripts of
  // India and Thailand, whose words are cut by marks every few letters, nor CJK, whose runs
  // of letters the general path reads at once. Russian or Greek: a pass 20-25% faster,
  // Vietnamese 1.7 -> 0.9 ms (cl100k_base), Korean 1.5 -> 1.2 ms.
  auto continues = [p](unsigned k) { return (p[k] & 0xC0) == 0x80; };
  uint64_t caseless = 0;  // (with split_case)
  for (uint64_t rest = b.high; rest != 0;) {
    const unsigned j = static_cast<unsigned>(__builtin_ctzll(rest));
    const unsigned char first = p[j];
    uint8_t c = 0;
    uint64_t bytes = 0;
    if (first >= 0xC2 && first <= 0xDF) {
      if (j > 62 || !continues(j + 1)) break;
      c = two_byte_letters.of[(first & 0x1Fu) << 6 | (p[j + 1] & 0x3Fu)];
      bytes = uint64_t{3} << j;
    } else if (first == 0xE1 || (first >= 0xEA && first <= 0xED)) {
      if (j > 61 || !continues(j + 1) || !continues(j + 2)) break;
      // From U+1200 on (Myanmar's words, cut by marks every few letters, went 10% slower, and
      // Georgian's, mostly too long for the piece cache, gained nothing).
      if (first == 0xE1 && p[j + 1] < 0x88) break;
      c = letter_class(
          uc::table_flags((first & 0x0Fu) << 12 | (p[j + 1] & 0x3Fu) << 6 | (p[j + 2] & 0x3Fu)));
      bytes = uint64_t{7} << j;
    }
    if (c == 0) break;
    if (split_case && (c & kClassCaseless) != 0) caseless |= bytes;
    b.letter |= bytes;
    b.high &= ~bytes;
    if ((c & kClassUpper) != 0) b.upper |= bytes;
    rest &= ~bytes;
  }
  // With split_case, a letter of neither case is in both of o200k_base's classes: it goes with
  // the lowercase ones after it ([UPPER]*[LOWER]+) as a lowercase letter would, and, unlike
  // one, with uppercase ones after it when it starts a word ("\u05d0A" is one piece, where
  // "aA" is two). In a block where one is followed by an uppercase letter, none of them is a
  // letter here: the general path takes the words from the first of them on. (Hebrew and
  // Arabic: a pass 1.65 -> 1.14 ms and 1.70 -> 1.35 ms, o200k_base.)
  if (split_case && ((caseless << 1) & b.upper) != 0) {
    b.letter &= ~caseless;
    b.high |= caseless;
  }
  return b;
}

// At byte i of p (at least 64 bytes from i on), the pieces that follow one another there,
// found in one step from bit masks: where each ends is written to ends (at most max), the count
// returned; 0 when the first piece is none of these. text_end: 0, or the bit of the block where
// the text ends (the bytes from there on are zeros). cl100k_family: the pattern is
// cl100k_base's or o200k_base's, not GPT-2's. The pieces:
// - a word " ?[A-Za-z]+" (a space and letters, those of two bytes too; the first may lack the
//   space, or with cl100k_family be a tab). With split_case (o200k_base) a letter run is cut
//   where an uppercase letter follows a lowercase one ([A-Z]*[a-z]+ and [A-Z]+[a-z]*, every
//   letter here being Lu, Lt or Ll);
// - a run of spaces (and with cl100k_family, tabs) before a word or punctuation, but its last
//   one (\s+(?!\S)); and with cl100k_family, a tab before punctuation or a digit (\s+);
// - a run of punctuation, or a space and one, ending before a space, a letter, the text's end
//   or (with cl100k_family) the newlines its piece takes ([\r\n]* in cl100k_base, [\r\n/]* in
//   o200k_base). No word alternative takes such a run but, with cl100k_family, a single
//   character of it that starts a piece (after a letter or newlines, or at i) before a letter:
//   the optional [^\r\n\p{L}\p{N}] of the word after it (".name", "_case", "(arg", "\u201CThe",
//   "\u2019s");
// - with cl100k_family, a run of newlines after a letter or digit, before a letter, a digit or
//   punctuation: \s*[\r\n] (cl100k_base) and \s*[\r\n]+ (o200k_base) take it whole, where
//   GPT-2's pattern splits it;
// - with cl100k_family, a run of one to three ASCII digits (\p{N}{1,3}; a longer run ends the
//   region where it starts, for the general path to cut), and a space before one, a piece of
//   its own (\s+ once \s+(?!\S) could not take it).
// The first piece may start with a letter, a space or punctuation. Only ends the block decides
// are given: a word at the block's end may go on past it, or (at a non-ASCII byte) with a
// letter or mark, or (in o200k_base, at an apostrophe) with a contraction; a run of spaces,
// punctuation or newlines cut off there may go on; the general path takes such a piece. At the
// text's end every piece is done. English text and code are mostly these pieces, and taking
// them one by one cost a mispredicted branch at nearly every piece's end.
// (word_run once its block is classified; digits: the block has ASCII digits, and the pattern
// is cl100k_family's. Most blocks of English have none, and the masks of digits in all of them
// cost it 1.3% more instructions.)
template <bool split_case, bool cl100k_family, bool digits>
TOKENMILL_ALWAYS_INLINE size_t block_pieces(const Block64& b, const unsigned char* p, size_t i,
                                            uint64_t text_end, size_t* ends, size_t max) {
  // With cl100k_family, tabs: a tab is a word's prefix as a space is ("\tname", the optional
  // [^\r\n\p{L}\p{N}] of the word alternatives), and one of a run of spaces and tabs, but
  // before punctuation or a digit it is a piece of its own (\s+: only a space goes with the
  // punctuation after it, " ?[^\s\p{L}\p{N}]+"), and the punctuation after it may be the prefix
  // of a word. (GPT-2's pattern has no such prefix: there a tab is a piece of its own before a
  // word too, and ends the region.) The indentation of C and Go, a fifth of the pieces of
  // code the general path took.
  const uint64_t tab = cl100k_family ? b.tab : 0;
  const uint64_t blank = b.space | tab;
  const uint64_t space_word = blank & (b.letter >> 1);  // a space or tab with a letter after it
  // A space or tab with another after it: all but the last of a run (the run is a piece of its
  // own only if it ends before a word, punctuation or a digit, and then its last one is a
  // space_word, a space_punct, a tab_punct or a space_digit; a run that ends otherwise ends the
  // region at its last one, its piece unfinished).
  const uint64_t space_space = blank & (blank >> 1);
  const uint64_t space_punct = b.space & (b.punct >> 1);  // starts " ?[^\s\p{L}\p{N}]+"
  const uint64_t tab_punct = tab & (b.punct >> 1);        // a piece of its own
  // With cl100k_family, ASCII digits, and a space or tab before one (a piece of its own).
  const uint64_t digit = digits ? b.digit : 0;
  const uint64_t space_digit = blank & (digit >> 1);
  const uint64_t spaced = space_word | space_space | space_punct | tab_punct | space_digit;
  if (((b.letter | spaced | b.punct) & 1) == 0) return 0;
  // With cl100k_family, the newlines right after a run of punctuation, which its piece takes:
  // each run of them that starts after punctuation, found by carrying a bit through it (the
  // sum's changed bits). In o200k_base a slash after them would go on with the piece: there a
  // tail's last newline is left out when a slash follows it, and the region ends at it, the
  // piece unfinished. (The only slashes that matter, those after a newline, are few: looked
  // at one by one.)
  uint64_t slash = 0;
  if (split_case) {
    for (uint64_t c = b.newline & (b.punct >> 1); c != 0; c &= c - 1) {
      const unsigned j = static_cast<unsigned>(__builtin_ctzll(c)) + 1;  // below 64
      if (p[i + j] == '/') slash |= uint64_t{1} << j;
    }
  }
  uint64_t tail = 0;
  if (cl100k_family) {
    const uint64_t first = b.newline & (b.punct << 1);
    tail = ((b.newline + first) ^ b.newline) & b.newline & ~(slash >> 1);
  }
  // With cl100k_family, a run of newlines, a piece of its own after a letter: each newline
  // followed by another, by a letter or by punctuation but a slash (which may go on with a
  // tail) is in; a run that ends otherwise ends the region at its last newline, its piece
  // unfinished.
  const uint64_t line_break =
      cl100k_family ? b.newline & ((b.newline | b.letter | digit | (b.punct & ~slash)) >> 1) : 0;
  // Punctuation followed by more of it, by a letter, by a space in the region, by its tail or
  // by the text's end (so a run of it is in only if the piece after it starts in the region;
  // a run cut short leaves the region where it stops being so).
  const uint64_t punct_in =
      b.punct & ((b.punct | b.letter | digit | spaced | tail | text_end) >> 1);
  // One character of it starting a piece (at i, or after a letter or newlines) before a
  // letter: a word's prefix. An ASCII one, or the three bytes of a quote or dash.
  uint64_t prefix = 0;
  if (cl100k_family) {
    const uint64_t after = ((b.letter | digit | tail | line_break | tab) << 1) | 1;
    prefix = b.punct & (b.letter >> 1) & after;
    if (b.quote != 0) {  // (few blocks)
      const uint64_t quote = b.quote & after & (b.letter >> 3);
      prefix |= quote | quote << 1 | quote << 2;
    }
  }
  // The first run of four digits or more (its first digit: no digit is before it) ends the
  // region.
  const uint64_t four = digit & (digit >> 1) & (digit >> 2) & (digit >> 3);
  const uint64_t out =
      ~(b.letter | digit | spaced | punct_in | tail | line_break) | (four & (~four + 1));
  const unsigned end = out == 0 ? 64u : static_cast<unsigned>(__builtin_ctzll(out));
  const uint64_t region = end == 64 ? ~uint64_t{0} : (uint64_t{1} << end) - 1;
  // Pieces start at a space or tab before a word, at a space before punctuation, at a tab
  // before punctuation or a digit, at the first of a run of spaces and tabs, at the first of a
  // run of punctuation after a letter, a tab or a newline (a prefix is one such run), at a
  // newline after a letter, and at a letter after punctuation that is not its prefix or after
  // a newline.
  uint64_t starts = space_word | space_punct | tab_punct | (space_space & ~(blank << 1)) |
                    (b.punct & ~(b.punct << 1) & ~(b.space << 1)) |
                    (line_break & ((b.letter | digit) << 1)) | space_digit |
                    (digit & ~(digit << 1)) |
                    (b.letter & (((b.punct & ~prefix) | digit | tail | line_break) << 1));
  if (split_case) starts |= b.upper & ((b.letter & ~b.upper) << 1);
  starts &= region & ~uint64_t{1};
  size_t k = 0;
  while (starts != 0 && k < max) {
    ends[k++] = i + static_cast<size_t>(__builtin_ctzll(starts));
    starts &= starts - 1;
  }
  // The last piece ends at `end` if the text ends there, or if it is a word (a letter before
  // `end`) and the byte there is ASCII and, for o200k_base, not an apostrophe, or digits and
  // the byte there ASCII (a digit or other number beyond ASCII may go on with them).
  if (starts == 0 && k < max && end > 0 && end < 64 &&
      (((text_end >> end) & 1) != 0 ||
       (((b.high >> end) & 1) == 0 && (((digit >> (end - 1)) & 1) != 0 ||
                                        (((b.letter >> (end - 1)) & 1) != 0 &&
                                         !(split_case && p[i + end] == '\'')))))) {
    ends[k++] = i + end;
  }
  return k;
}

// (Inlined into its loop: called, it cost code 7% more instructions.)
template <bool split_case, bool cl100k_family>
TOKENMILL_ALWAYS_INLINE size_t word_run(const unsigned char* p, size_t i, uint64_t text_end,
                                        size_t* ends, size_t max) {
  const Block64 b = classify64<split_case>(p + i);
  if (cl100k_family && b.digit != 0) {
    return block_pieces<split_case, cl100k_family, true>(b, p, i, text_end, ends, max);
  }
  return block_pieces<split_case, cl100k_family, false>(b, p, i, text_end, ends, max);
}

// Whether word_run may take a piece that starts with byte c: a letter, a space, the first
// byte of a quote or dash, or (cl100k_family) a tab. (Not ASCII punctuation: in code, most
// pieces that start with it after the general path's are taken by ascii_other_run, and a block
// classified for them cost more than it gave.)
template <bool cl100k_family>
inline bool may_start_block(unsigned char c) {
  return letter_ascii(c) || c == ' ' || c == 0xE2 || (cl100k_family && c == '\t');
}
#endif

}  // namespace

bool piece_dropped(SplitPattern pattern, std::string_view text, size_t i) {
  return pattern == SplitPattern::kWords && is_space(char_at(text, i));
}

namespace {

// scan_pieces for one pattern: scan, its general path; with kBlocks, the pieces word_run takes
// (kSplitCase, kFamily: its arguments) are taken that way where they start.
template <bool kBlocks, bool kSplitCase, bool kFamily, typename Scan>
size_t scan_pieces_with(std::string_view text, size_t i, size_t* ends, size_t max, Scan scan) {
  size_t k = 0;
#ifdef TOKENMILL_SSE2
  const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
#endif
  while (k < max && i < text.size()) {
#ifdef TOKENMILL_SSE2
    // (A word starts here, a letter or a space and a letter; or a run of spaces, as before
    // each line of indented code; or a space and punctuation, as in " = "; or a quote or dash.)
    if (kBlocks && may_start_block<kFamily>(bytes[i])) {
      size_t got = 0;
      const size_t avail = text.size() - i;
      if (avail >= 64) {
        got = word_run<kSplitCase, kFamily>(bytes, i, 0, ends + k, max - k);
      } else {
        // The text's last bytes (a paragraph's last third), copied before zeros: a zero
        // byte is none of the classes, so the region stops at the text's end at the latest.
        unsigned char last[64] = {};
        std::memcpy(last, bytes + i, avail);
        got = word_run<kSplitCase, kFamily>(last, 0, uint64_t{1} << avail, ends + k, max - k);
        for (size_t j = k; j < k + got; ++j) ends[j] += i;
      }
      if (got != 0) {
        k += got;
        i = ends[k - 1];
        continue;
      }
    }
#endif
    i = past(text, i, scan(text, i));
    ends[k++] = i;
  }
  return k;
}

}  // namespace

size_t scan_pieces(SplitPattern pattern, std::string_view text, size_t i, size_t* ends,
                   size_t max) {
  using S = std::string_view;
  switch (pattern) {
    case SplitPattern::kGPT2:
      return scan_pieces_with<true, false, false>(text, i, ends, max,
                                                  [](const S& s, size_t j) { return gpt2(s, j); });
    case SplitPattern::kCL100K:
      return scan_pieces_with<true, false, true>(text, i, ends, max,
                                                 [](const S& s, size_t j) { return cl100k(s, j); });
    case SplitPattern::kO200K:
      return scan_pieces_with<true, true, true>(text, i, ends, max,
                                                [](const S& s, size_t j) { return o200k(s, j); });
    case SplitPattern::kWords:
      break;
  }
  return scan_pieces_with<false, false, false>(text, i, ends, max,
                                               [](const S& s, size_t j) { return words(s, j); });
}

void pretokenize(SplitPattern pattern, std::string_view text, std::vector<uint32_t>& ends) {
  // Through scan_pieces, as encoding reads text (so the two never split differently).
  size_t batch[256];
  for (size_t i = 0; i < text.size();) {
    const size_t got = scan_pieces(pattern, text, i, batch, 256);
    for (size_t k = 0; k < got; ++k) ends.push_back(static_cast<uint32_t>(batch[k]));
    i = batch[got - 1];
  }
}

void pretokenize_units(SplitPattern pattern, const void* data, std::size_t length, int width,
                       std::vector<uint32_t>& ends) {
  switch (width) {
    case 1:
      scan_text(pattern, Units<uint8_t>{static_cast<const uint8_t*>(data), length}, ends);
      break;
    case 2:
      scan_text(pattern, Units<uint16_t>{static_cast<const uint16_t*>(data), length}, ends);
      break;
    default:
      scan_text(pattern, Units<uint32_t>{static_cast<const uint32_t*>(data), length}, ends);
      break;
  }
}

}  // namespace tokenmill
