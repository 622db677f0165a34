// BERT's normalizer and pre-tokenizer as one table-driven pass, then WordPiece: a whole text in,
// ids and character offsets into it out, with no Python object per piece or token.
//
// Every step of BERT's normalizer (clean text, CJK spacing, accent stripping, lowercasing) works
// character by character, so together they map each input character to a string of its own:
// the Python side computes that string, with its own normalizer, for every character it
// changes, and the core only looks it up. Each output character therefore comes from exactly
// one input character, which gives the offsets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenmill/encode.h"  // Encoded
#include "tokenmill/flat_map.h"
#include "tokenmill/wordpiece.h"

namespace tokenmill {

class BertPipeline {
 public:
  // changed: (code point, what the normalizer makes of it, without CJK spacing) for every code
  // point it changes; cjk: inclusive ranges that get a space on each side (empty: none);
  // punctuation and spaces: the pre-tokenizer's classes of normalized characters.
  BertPipeline(const std::vector<std::pair<uint32_t, std::string>>& changed,
               const std::vector<std::pair<uint32_t, uint32_t>>& cjk,
               const std::vector<uint32_t>& punctuation, const std::vector<uint32_t>& spaces);

  // model must have an unknown token. Thread-safe.
  void encode(const WordPieceModel& model, std::string_view text, Encoded& out) const;

  // The texts split across up to `threads` threads; results in input order.
  std::vector<Encoded> encode_texts(const WordPieceModel& model,
                                    const std::vector<std::string>& texts,
                                    std::size_t threads) const;

 private:
  static constexpr uint64_t kPunctuation = 1;
  static constexpr uint64_t kSpace = 2;
  bool is_cjk(uint32_t cp) const;
  uint64_t flags(uint32_t cp) const;

  std::vector<std::string> replacements_;
  PairMap changed_;  // code point -> index into replacements_
  PairMap flags_;    // code point -> kPunctuation | kSpace
  std::vector<std::pair<uint32_t, uint32_t>> cjk_;
};

}  // namespace tokenmill
