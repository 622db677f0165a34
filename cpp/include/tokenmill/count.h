// Counting pre-tokens: split texts with a native scanner and count the pieces, on several
// threads, with memory bounded by the number of distinct pieces (not by the text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenmill/pretokenize.h"

namespace tokenmill {

class PieceCounter {
 public:
  PieceCounter(SplitPattern pattern, std::size_t threads);

  // Counts the pieces of each text. Pieces keep the order they were first seen in, whatever the
  // thread count: each thread takes a contiguous share and shares are merged in order.
  void add(const std::vector<std::string>& texts);

  // (piece, count) in first-seen order.
  const std::vector<std::pair<std::string, uint64_t>>& items() const { return items_; }

 private:
  using Local = std::pair<std::unordered_map<std::string, std::size_t>,
                          std::vector<std::pair<std::string, uint64_t>>>;
  void count_range(const std::vector<std::string>& texts, std::size_t begin, std::size_t end,
                   Local& out) const;
  void merge(Local& local);

  SplitPattern pattern_;
  std::size_t threads_;
  std::unordered_map<std::string, std::size_t> index_;
  std::vector<std::pair<std::string, uint64_t>> items_;
};

}  // namespace tokenmill
