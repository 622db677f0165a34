// WordPiece encoding (BERT): within each word, greedy longest-match-first. From the word's start,
// take the longest prefix that is a vocabulary token, then continue from where it ended with
// tokens that carry the continuing-subword prefix ("##"). A word with a part no token matches,
// or longer than max_input_chars_per_word characters, becomes ONE unknown token for the whole
// word, as Google's BERT and Hugging Face do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenmill/bpe.h"  // TokenSpan
#include "tokenmill/flat_map.h"

namespace tokenmill {

struct WordPieceOptions {
  int64_t unk_id = -1;  // -1: the vocabulary has no unknown token (a word needing it is an error)
  std::string continuing_subword_prefix = "##";
  std::size_t max_input_chars_per_word = 100;
};

class WordPieceModel {
 public:
  WordPieceModel(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids,
                 WordPieceOptions options);

  // Appends the tokens of one word (character spans within it) to out. Returns false, appending
  // nothing, when the word needs the unknown token and there is none. Thread-safe.
  bool encode_word(std::string_view word, std::vector<TokenSpan>& out) const;

  // Encodes a batch of words into flat [id, word index, start, end] quadruples. Returns the
  // index of the first word that needed the missing unknown token, or words.size() if none.
  std::size_t encode_words(const std::vector<std::string>& words,
                           std::vector<uint32_t>& flat) const;

 private:
  WordPieceOptions options_;
  // Word-initial tokens by their text, and continuing tokens by their text WITHOUT the prefix:
  // the lookup of "##" + part becomes a lookup of part, with no string built per try.
  StringMap initial_;
  StringMap continuing_;
  // The longest token of each map, in bytes: longer candidates are never looked up.
  std::size_t max_initial_bytes_ = 0;
  std::size_t max_continuing_bytes_ = 0;
};

}  // namespace tokenmill
