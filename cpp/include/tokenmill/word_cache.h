// The word cache: the tokens of words a model has merged before, for the words the piece cache
// (bpe.cc: up to 32 bytes and 4 tokens, or 8 of small ids) cannot hold, so that meeting one
// again costs a hash and a comparison instead of the merging. Long pieces are most of Chinese
// and Japanese (runs of characters between punctuation), and merging them was two thirds of
// encoding such text again.
//
// Shared by threads. Records go in blocks allocated as they fill, and are never moved nor
// changed once written; a word is found through an index of (hash, record) slots that are only
// ever filled, each published with a release store after its record is written, and replaced
// by one twice its size before it is more than half full. So readers take no lock, and writers
// take one only to append. Nothing is evicted: once the cache holds `capacity` words, or its
// record budget (64 words of 4 bytes a word, 32 MiB at most) has too little left for a long
// word, it stops growing (the words of a text met early are its frequent ones), and says so, so
// a text of new words (a base64 blob) does not pay for a lock on every one.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string_view>

namespace tokenmill {

struct TokenSpan;

class WordCache {
 public:
  // Words of at most this many bytes are kept (a token's span is then two bytes).
  static constexpr std::size_t kMaxWordBytes = 1024;
  static_assert(kMaxWordBytes < 2048, "a record's length has 11 bits");
  // The most the records of one cache take.
  static constexpr std::size_t kMaxRecordBytes = std::size_t{32} << 20;

  explicit WordCache(std::size_t capacity);
  ~WordCache();
  WordCache(const WordCache&) = delete;
  WordCache& operator=(const WordCache&) = delete;

  // A word's tokens as kept: count ids, and their spans as start | end << 16, or null where
  // the tokens were a byte-level model's, each starting where the one before it ended, the
  // first at 0 and the last ending at the word's end (their ends are then their lengths').
  struct Found {
    const uint32_t* ids;
    const uint32_t* spans;
    std::size_t count;
  };
  // The tokens kept for word (hash: hash_bytes(word)), if any.
  bool find(std::string_view word, uint64_t hash, Found& found) const;
  // Asks for the index line where word's search starts (hash: hash_bytes(word)).
  void prefetch(uint64_t hash) const;
  // Keeps word's tokens (each span within the word, as encode_word gives them; bytes, if
  // byte_spans) unless the cache is full or the word too long; true if the word is in the
  // cache afterwards.
  bool keep(std::string_view word, uint64_t hash, const TokenSpan* tokens, std::size_t count,
            bool byte_spans);
  // Whether keep has found the cache full (then it only ever answers false).
  bool full() const { return full_.load(std::memory_order_relaxed); }
  std::size_t size() const;  // words kept

  static constexpr std::size_t kMaxBlocks = 64;  // record blocks at most

 private:
  struct Index;
  const uint32_t* record(uint64_t slot) const;  // the record a filled slot names
  Index* grow_index(Index* old);                // (writers) a new index, published
  bool room(std::size_t need, uint32_t& name);  // (writers) space for a record, and its name

  const std::size_t capacity_;       // words at most
  const std::size_t record_budget_;  // record words at most
  std::atomic<Index*> index_{nullptr};
  std::atomic<std::size_t> words_{0};
  std::atomic<bool> full_{false};
  // Record blocks: each pointer written once, before any slot names a record in it.
  uint32_t* blocks_[kMaxBlocks] = {};
  // The rest is the writers', under the lock.
  std::mutex writer_;
  std::unique_ptr<Index> newest_;  // what index_ points to (and through it, older ones)
  std::size_t block_count_ = 0;
  std::size_t block_words_ = 0;  // the last block's size
  std::size_t block_used_ = 0;   // and how much of it records take
  std::size_t allocated_ = 0;    // record words allocated in all
};

}  // namespace tokenmill
