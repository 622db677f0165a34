// SentencePiece's normalization, as its .model files specify it: a precompiled character map
// (a Darts double-array trie from input strings to their replacements, e.g. NFKC), then the
// whitespace rules: drop leading, trailing and repeated spaces, put a "▁" before the text, and
// spell each space as "▁".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenmill/flat_map.h"

namespace tokenmill {

struct SentencePieceNormalizerOptions {
  bool add_dummy_prefix = true;
  bool remove_extra_whitespaces = true;
  bool escape_whitespaces = true;
};

class SentencePieceNormalizer {
 public:
  // charsmap: the normalizer_spec's precompiled_charsmap (empty: no mapping). user_defined: the
  // model's user-defined pieces, which are kept as they are. Throws Error on a malformed map.
  SentencePieceNormalizer(std::string charsmap, const std::vector<std::string>& user_defined,
                          SentencePieceNormalizerOptions options);

  // The normalized text; for each of its characters, the characters [start, end) of `text` it
  // came from (without `offsets`, starts and ends are left empty).
  void normalize(std::string_view text, std::string& out, std::vector<uint32_t>& starts,
                 std::vector<uint32_t>& ends, bool offsets = true) const;

 private:
  // The replacement of the longest match at text[at...] and the bytes it consumes.
  std::string_view normalize_prefix(std::string_view text, std::size_t at,
                                     std::size_t& consumed) const;
  // Longest charsmap key that prefixes s: its value, or -1; length in `length`.
  int64_t longest_key(std::string_view s, std::size_t& length) const;
  // The replacement a key's value names (throws Error if the map does not hold it).
  std::string_view replacement(int64_t value) const;

  std::string blob_;          // the whole map; units_ and strings_ point into it
  std::vector<uint32_t> units_;
  std::string_view strings_;  // replacements, each NUL-terminated
  StringMap user_defined_;
  std::size_t longest_user_defined_ = 0;
  bool user_defined_first_[256] = {};  // the first bytes of user-defined pieces
  SentencePieceNormalizerOptions options_;
};

}  // namespace tokenmill
