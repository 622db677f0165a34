// Counting pre-tokens: split texts with a native scanner and count the pieces, on several
// threads, with memory bounded by the number of distinct pieces (not by the text).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenmill/pretokenize.h"

namespace tokenmill {

// Distinct pieces with their counts and where each was first seen, in one flat table: an
// open-addressing index over entries whose bytes sit in one arena (no node or string per
// piece, and a probe usually settles on the stored hash alone).
class PieceTable {
 public:
  // The first place a piece was seen at: text number, then byte offset in that text.
  struct Place {
    uint64_t text;
    uint32_t at;
    bool operator<(const Place& o) const { return text != o.text ? text < o.text : at < o.at; }
  };
  struct Entry {
    uint64_t count;
    Place first;
    uint32_t offset;  // bytes: arena[offset, offset + len)
    uint32_t len;
  };
  void add(std::string_view piece, uint64_t hash, uint64_t count, Place first);
  std::string_view piece(const Entry& e) const { return {arena_.data() + e.offset, e.len}; }
  const std::vector<Entry>& entries() const { return entries_; }

 private:
  struct Slot {
    uint64_t hash;
    uint32_t entry;  // index + 1; 0 marks a free slot
  };
  void grow();
  std::vector<Slot> slots_;
  std::vector<Entry> entries_;
  std::string arena_;
};

class PieceCounter {
 public:
  PieceCounter(SplitPattern pattern, std::size_t threads);

  // Counts the pieces of each text. Each thread counts a contiguous share of the texts into a
  // table of its own, kept from batch to batch.
  void add(const std::vector<std::string_view>& texts);

  // (piece, count) in first-seen order, whatever the thread count or batching: every piece
  // keeps the first place it was seen at (text number, byte offset), and the threads' tables
  // are merged and sorted by it.
  std::vector<std::pair<std::string_view, uint64_t>> items();

 private:
  void count_range(const std::vector<std::string_view>& texts, std::size_t begin,
                   std::size_t end, PieceTable& table) const;

  SplitPattern pattern_;
  std::size_t threads_;
  uint64_t texts_seen_ = 0;
  std::vector<PieceTable> tables_;
};

}  // namespace tokenmill
