// WordPiece training by the likelihood criterion (Schuster & Nakajima 2012, as BERT's WordPiece
// is described): each round merges the adjacent pair (a, b) with the highest
//     score = count(ab) / (count(a) * count(b)),
// the gain in a unigram model's likelihood from joining them, rather than BPE's raw count(ab).
// Symbols after a word's first carry the continuing-subword prefix ("##"); a merge keeps the
// left symbol's form ("un" + "##able" -> "unable", "##a" + "##b" -> "##ab").
//
// Ties (equal scores, compared exactly as fractions) go to the more frequent pair, then to the
// pair whose (left, right) strings are smallest in code point order.
//
// Incremental like the BPE trainer: a pair keeps an index of the words it occurs in, and a lazy
// max-heap holds entries that snapshot the three counts of a score. Unlike BPE a score can RISE
// (when count(a) falls because a was merged elsewhere), so whenever one of the three counts
// changes a fresh entry is pushed; an entry whose snapshot is no longer current is dropped when
// it reaches the top.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tokenmill {

struct WordPieceTrainerOptions {
  uint64_t vocab_size = 0;    // total size including special tokens
  uint64_t min_frequency = 0;  // pairs seen fewer times are never merged
  std::vector<std::string> special_tokens;    // ids 0..k-1
  std::vector<std::string> initial_alphabet;  // characters always in the alphabet (both forms)
  int64_t limit_alphabet = -1;                // -1: no limit
  std::string continuing_subword_prefix = "##";
  // How many stale heap entries beyond twice the pairs trigger a rebuild of the heap (a test
  // sets 0 to rebuild after every merge; the result must not change).
  std::size_t heap_slack = 65536;
};

struct WordPieceMerge {
  uint32_t left;
  uint32_t right;
  uint32_t result;
  uint64_t pair_count;   // count(ab) when merged
  uint64_t left_count;   // count(a)
  uint64_t right_count;  // count(b)
};

struct WordPieceTrainResult {
  std::vector<std::string> vocab;      // token strings by id, special tokens first
  std::vector<WordPieceMerge> merges;  // in the order they were learnt
  std::size_t alphabet_size = 0;       // single-character symbols, both forms
  uint64_t words_dropped = 0;          // distinct words holding a character outside the alphabet
};

// progress(merges done, vocabulary size) is called now and then; it may be empty.
WordPieceTrainResult train_wordpiece(const std::vector<std::string>& words,
                                     const std::vector<uint64_t>& counts,
                                     const WordPieceTrainerOptions& options,
                                     const std::function<void(std::size_t, std::size_t)>& progress);

}  // namespace tokenmill
