// BPE training: the merge loop with incremental pair counts.
//
// Each round merges the most frequent adjacent pair (pairs never cross words). Counts are 64-bit
// and never wrap: training refuses a corpus whose sum of count x (symbols - 1) over the words,
// an upper bound of every pair count the merge loop can reach, is over 2^64 - 1.
// Only the words that contain the merged pair are touched: each pair keeps an index of the words
// it occurs in, and a lazy max-heap holds (count, tie key) entries; an entry whose count or key
// is no longer current is dropped when it reaches the top. Ties are broken either by the pair's
// two symbol strings (smallest first) or by the pair's first occurrence in corpus order, the
// order textbook code gets from `max(dict, key=...)` over an insertion-ordered dict.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

enum class TieBreak { kLexicographic, kFirstSeen };

struct BPETrainerOptions {
  uint64_t vocab_size = 0;   // total size including special tokens; used when num_merges < 0
  int64_t num_merges = -1;   // >= 0: stop after this many merges instead
  uint64_t min_frequency = 0;
  std::vector<std::string> special_tokens;    // ids 0..k-1
  std::vector<std::string> initial_alphabet;  // characters always in the alphabet
  int64_t limit_alphabet = -1;                // -1: no limit
  std::string continuing_subword_prefix;
  std::string end_of_word_suffix;
  std::string end_of_word_marker;  // non-empty: a separate symbol appended to every word
  int64_t max_token_length = -1;   // in characters; -1: no limit
  TieBreak tie_break = TieBreak::kLexicographic;
  std::size_t threads = 1;  // lexicographic ties: large merges are split between two threads
};

struct MergeStep {
  uint32_t left;
  uint32_t right;
  uint32_t result;
  uint64_t count;
};

struct BPETrainResult {
  std::vector<std::string> vocab;  // token strings by id, special tokens first
  std::vector<MergeStep> merges;   // in rank order
  std::size_t alphabet_size = 0;   // characters, end-of-word marker included
};

// Sums of counts that may pass 2^64. (__extension__: -Wpedantic knows the type is not ISO C++.)
__extension__ typedef unsigned __int128 WideCount;

// The sum of count x n over the words, exact (128 bits). The trainers add each word's bound of
// what it can contribute to a count (BPE: its pairs; WordPiece: its symbols) while building
// their tables, and check the total once: one multiply-add per distinct word.
class CountBound {
 public:
  void add(uint64_t count, uint64_t n) { total_ += static_cast<WideCount>(count) * n; }
  // Throws Error, naming the total and the limit, if it is over 2^64 - 1. `what` says what was
  // summed ("count x (symbols - 1)").
  void check(const char* what) const;

 private:
  WideCount total_ = 0;
};

// progress(merges done, vocabulary size) is called now and then; it may be empty.
BPETrainResult train_bpe(const std::vector<std::string_view>& words,
                         const std::vector<uint64_t>& counts,
                         const BPETrainerOptions& options,
                         const std::function<void(std::size_t, std::size_t)>& progress);

}  // namespace tokenmill
