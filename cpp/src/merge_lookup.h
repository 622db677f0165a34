// Inside the core: the merge lookup every encoder's inner loop makes (bpe.cc, the backtracking
// search's checks in bpe_backtrack.cc, the bucket walk in bpe_long.cc), defined here so each
// of them inlines it rather than calling into another file.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tokenmill/bpe.h"

namespace tokenmill {

inline constexpr uint64_t kNoMerge = ~uint64_t{0};

// v (a pointer or an integer), as a value in a register that the compiler cannot work out
// again. Given a thread-local's address, GCC recomputes it at each use after inlining (in a
// shared library, a call to __tls_get_addr) rather than keep it: 1.1M calls over a megabyte of
// DNA, one a pair the search checked. Given two words loaded side by side, it may merge them
// into one wider load (put_entry_ids, bpe.cc).
template <class T>
inline T pinned(T v) {
#if defined(__GNUC__) || defined(__clang__)
  __asm__("" : "+r"(v));
#endif
  return v;
}

// The pair filter: 2^21 bits, indexed by the top bits of a multiplicative hash of the pair.
inline constexpr int kPairFilterBits = 21;
inline constexpr std::size_t kPairFilterWords = (std::size_t{1} << kPairFilterBits) / 64;
inline constexpr uint64_t kPairHashMul = 0x9E3779B97F4A7C15ULL;
inline uint64_t pair_filter_bit(uint64_t key) {
  return (key * kPairHashMul) >> (64 - kPairFilterBits);
}

// A small direct-mapped cache of recent pair lookups, one per thread: the merge table of a large
// vocabulary is megabytes (a cache miss per lookup), while the pairs of real text repeat (the
// bytes of common characters), so most lookups hit these 96 KiB instead. Entries carry the
// serial number of the model they came from (never reused, unlike an address), so models never
// see each other's.
struct PairCacheEntry {
  uint64_t model;
  uint64_t key;
  uint64_t value;  // packed rank/result, or kNoMerge
};
inline constexpr int kPairCacheBits = 12;
inline constexpr std::size_t kPairCacheSize = std::size_t{1} << kPairCacheBits;

inline bool BPEModel::may_merge(uint64_t key) const {
  const uint64_t bit = pair_filter_bit(key);
  return ((pair_filter_[bit >> 6] >> (bit & 63)) & 1) != 0;
}

inline uint64_t BPEModel::merge_of(uint32_t left, uint32_t right) const {
  const uint64_t key = pair_key(left, right);
  uint64_t packed = kNoMerge;
  if (may_merge(key) && !merges_.find(key, packed)) packed = kNoMerge;
  return packed;
}

inline bool BPEModel::find_merge(uint32_t left, uint32_t right, uint32_t& rank,
                                 uint32_t& result, PairCacheEntry* cache) const {
  const uint64_t key = pair_key(left, right);
  if (!may_merge(key)) return false;
  PairCacheEntry& slot = cache[(key * kPairHashMul) >> (64 - kPairCacheBits)];
  uint64_t packed = 0;
  if (slot.model == serial_ && slot.key == key) {
    packed = slot.value;
  } else {
    if (!merges_.find(key, packed)) packed = kNoMerge;
    slot = {serial_, key, packed};
  }
  if (packed == kNoMerge) return false;
  rank = static_cast<uint32_t>(packed >> 32);
  result = static_cast<uint32_t>(packed & 0xFFFFFFFFu);
  return true;
}

}  // namespace tokenmill
