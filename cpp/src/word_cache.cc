#include "tokenmill/word_cache.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "tokenmill/bpe.h"

namespace tokenmill {

namespace {
// Capacity is bounded so the index (two to four slots a word, 8 bytes each) stays a few MiB.
constexpr std::size_t kMaxWords = std::size_t{1} << 18;
// The record budget a word, in words of 4 bytes: a piece of Chinese in a byte-level model (60
// bytes, 25 tokens) takes 41.
constexpr std::size_t kRecordWordsPerWord = 64;
// A record: [0] length | kContiguous (if so) | count << 16; then the word's bytes (zero-padded
// to 4) and its ids, and unless contiguous each token's span as start | end << 16.
constexpr uint32_t kLengthMask = 0x7FF;
constexpr uint32_t kContiguous = 0x800;
inline std::size_t byte_words(std::size_t len) { return (len + 3) / 4; }
// Records live in blocks that double from 16 KiB to 4 MiB, so a model that keeps a few words
// holds a few KiB. A slot names a record by block (6 bits) and offset in it (26 bits), plus 1.
constexpr std::size_t kFirstBlockWords = std::size_t{1} << 12;
constexpr std::size_t kLastBlockWords = std::size_t{1} << 20;
constexpr unsigned kOffsetBits = 26;
static_assert(WordCache::kMaxBlocks <= (std::size_t{1} << (32 - kOffsetBits)), "block bits");
// Room (in words of 4 bytes) below which the cache counts as full: a record of a piece of 300
// bytes and 150 tokens.
constexpr std::size_t kRoomLeftWhenFull = 256;
// The index starts at this many slots and doubles when half full.
constexpr std::size_t kFirstSlots = 256;
}  // namespace

// An index: (hash >> 32) << 32 | (record name), 0 where empty; a word's search starts at the
// slot its hash's high half names. Never changed but by filling empty slots; one that would be
// more than half full is replaced by one twice its size, and kept (readers may still be in it)
// until the cache goes.
struct WordCache::Index {
  explicit Index(std::size_t n) : mask(n - 1), slots(new std::atomic<uint64_t>[n]()) {}
  const std::size_t mask;
  const std::unique_ptr<std::atomic<uint64_t>[]> slots;
  std::unique_ptr<Index> older;  // the index this one replaced
};

WordCache::WordCache(std::size_t capacity)
    : capacity_(std::min(capacity, kMaxWords)),
      record_budget_(std::min(capacity_ * kRecordWordsPerWord, kMaxRecordBytes / 4)) {}

WordCache::~WordCache() {
  for (std::size_t b = 0; b < block_count_; ++b) delete[] blocks_[b];
}

std::size_t WordCache::size() const { return words_.load(std::memory_order_relaxed); }

const uint32_t* WordCache::record(uint64_t slot) const {
  const auto name = static_cast<uint32_t>(slot) - 1;
  return blocks_[name >> kOffsetBits] + (name & ((1u << kOffsetBits) - 1));
}

void WordCache::prefetch(uint64_t hash) const {
  const Index* index = index_.load(std::memory_order_acquire);
  if (index != nullptr) __builtin_prefetch(&index->slots[(hash >> 32) & index->mask]);
}

bool WordCache::find(std::string_view word, uint64_t hash, Found& found) const {
  const Index* index = index_.load(std::memory_order_acquire);
  if (index == nullptr || word.size() > kMaxWordBytes) return false;
  const uint64_t tag = hash >> 32;
  // Ends at an empty slot: an index is never more than half full.
  for (std::size_t i = tag & index->mask;; i = (i + 1) & index->mask) {
    const uint64_t slot = index->slots[i].load(std::memory_order_acquire);
    if (slot == 0) return false;
    if ((slot >> 32) != tag) continue;
    const uint32_t* r = record(slot);
    if ((r[0] & kLengthMask) != word.size() ||
        std::memcmp(r + 1, word.data(), word.size()) != 0) {
      continue;
    }
    found.count = r[0] >> 16;
    found.ids = r + 1 + byte_words(word.size());
    found.spans = (r[0] & kContiguous) != 0 ? nullptr : found.ids + found.count;
    return true;
  }
}

bool WordCache::keep(std::string_view word, uint64_t hash, const TokenSpan* tokens,
                     std::size_t count, bool byte_spans) {
  if (capacity_ == 0 || word.size() > kMaxWordBytes || count > 0xFFFF || full()) return false;
  bool contiguous = byte_spans;
  uint32_t at = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (tokens[k].start > 0xFFFF || tokens[k].end > 0xFFFF) return false;
    contiguous = contiguous && tokens[k].start == at;
    at = tokens[k].end;
  }
  contiguous = contiguous && at == word.size();
  const std::size_t need = 1 + byte_words(word.size()) + (contiguous ? 1 : 2) * count;
  std::lock_guard<std::mutex> lock(writer_);
  try {
    const uint64_t tag = hash >> 32;
    // The first empty slot of word's search in index, or npos if word is there.
    constexpr std::size_t npos = ~std::size_t{0};
    auto search = [&](const Index* index) {
      for (std::size_t i = tag & index->mask;; i = (i + 1) & index->mask) {
        const uint64_t slot = index->slots[i].load(std::memory_order_relaxed);
        if (slot == 0) return i;
        const uint32_t* r = record(slot);
        if ((slot >> 32) == tag && (r[0] & kLengthMask) == word.size() &&
            std::memcmp(r + 1, word.data(), word.size()) == 0) {
          return npos;  // another thread kept it first
        }
      }
    };
    Index* index = index_.load(std::memory_order_relaxed);
    std::size_t i = index == nullptr ? 0 : search(index);
    if (i == npos) return true;
    const std::size_t words = words_.load(std::memory_order_relaxed);
    if (words >= capacity_) {
      full_.store(true, std::memory_order_relaxed);
      return false;
    }
    if (index == nullptr || 2 * (words + 1) > index->mask + 1) {
      index = grow_index(index);
      i = search(index);
    }
    uint32_t name = 0;
    if (!room(need, name)) {
      // Full once what is left would not hold a long word's record; a record too large for
      // the rest is only turned away.
      if (record_budget_ - allocated_ + (block_words_ - block_used_) < kRoomLeftWhenFull) {
        full_.store(true, std::memory_order_relaxed);
      }
      return false;
    }
    uint32_t* r = const_cast<uint32_t*>(record(uint64_t{name} + 1));
    if (!word.empty()) {
      r[byte_words(word.size())] = 0;  // the padding after the bytes
      std::memcpy(r + 1, word.data(), word.size());
    }
    r[0] = static_cast<uint32_t>(word.size() | (contiguous ? kContiguous : 0) | count << 16);
    uint32_t* ids = r + 1 + byte_words(word.size());
    for (std::size_t k = 0; k < count; ++k) ids[k] = tokens[k].id;
    if (!contiguous) {
      for (std::size_t k = 0; k < count; ++k) ids[count + k] = tokens[k].start | tokens[k].end << 16;
    }
    // Published only now: a reader that sees the slot sees the record.
    index->slots[i].store(tag << 32 | (uint64_t{name} + 1), std::memory_order_release);
    words_.store(words + 1, std::memory_order_relaxed);
    return true;
  } catch (const std::bad_alloc&) {
    full_.store(true, std::memory_order_relaxed);
    return false;
  }
}

WordCache::Index* WordCache::grow_index(Index* old) {
  const std::size_t n = old == nullptr ? kFirstSlots : 2 * (old->mask + 1);
  auto index = std::make_unique<Index>(n);
  if (old != nullptr) {
    for (std::size_t k = 0; k <= old->mask; ++k) {
      const uint64_t slot = old->slots[k].load(std::memory_order_relaxed);
      if (slot == 0) continue;
      std::size_t i = (slot >> 32) & index->mask;
      while (index->slots[i].load(std::memory_order_relaxed) != 0) i = (i + 1) & index->mask;
      index->slots[i].store(slot, std::memory_order_relaxed);
    }
  }
  index->older = std::move(newest_);
  newest_ = std::move(index);
  // Released: a reader that finds the new index finds its slots and the records they name.
  index_.store(newest_.get(), std::memory_order_release);
  return newest_.get();
}

bool WordCache::room(std::size_t need, uint32_t& name) {
  if (block_count_ == 0 || need > block_words_ - block_used_) {
    // A new block: twice the last (up to kLastBlockWords), at least `need`, within the budget.
    if (block_count_ == kMaxBlocks || need > record_budget_ - allocated_) return false;
    std::size_t words =
        block_count_ == 0 ? kFirstBlockWords : std::min(2 * block_words_, kLastBlockWords);
    words = std::min(std::max(words, need), record_budget_ - allocated_);
    // Not initialised: a large block's pages are taken only as records are written.
    blocks_[block_count_] = new uint32_t[words];
    ++block_count_;
    allocated_ += words;
    block_words_ = words;
    block_used_ = 0;
  }
  name = static_cast<uint32_t>((block_count_ - 1) << kOffsetBits | block_used_);
  block_used_ += need;
  return true;
}

}  // namespace tokenmill
