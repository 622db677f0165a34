// Open-addressing hash maps for the hot lookups (vocabulary, merges): one flat array, linear
// probing, power-of-two capacity at most half full. Built once, then read-only, so lookups from
// many threads need no lock. std::unordered_map allocates a node per entry and chases a pointer
// per probe; these are several times faster on the encode path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace tokenmill {

// The size of a huge page (x86-64, and the usual arm64 one), which large tables ask for.
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// An allocator whose large blocks (2 MiB and up) are asked to be backed by 2 MiB pages on Linux:
// the maps below are read at random places, one TLB miss a lookup with 4 KiB pages. Smaller
// blocks, and other systems, get operator new.
template <typename T>
struct LargePageAllocator {
  using value_type = T;
  static constexpr std::size_t kHugePage = kHugePageBytes;

  LargePageAllocator() = default;
  template <typename U>
  LargePageAllocator(const LargePageAllocator<U>&) noexcept {}  // NOLINT: rebinding converts

  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_alloc();
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHugePage) {
      const std::size_t bytes = rounded(n);
      void* p = std::aligned_alloc(kHugePage, bytes);
      if (p == nullptr) throw std::bad_alloc();
      madvise(p, bytes, MADV_HUGEPAGE);  // a hint, before the pages are first touched
      return static_cast<T*>(p);
    }
#endif
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (n * sizeof(T) >= kHugePage) {
      std::free(p);
      return;
    }
#endif
    ::operator delete(p);
    (void)n;
  }
  static std::size_t rounded(std::size_t n) {
    return (n * sizeof(T) + kHugePage - 1) / kHugePage * kHugePage;
  }
  template <typename U>
  bool operator==(const LargePageAllocator<U>&) const noexcept { return true; }
  template <typename U>
  bool operator!=(const LargePageAllocator<U>&) const noexcept { return false; }
};

template <typename T>
using LargeVector = std::vector<T, LargePageAllocator<T>>;

// Has the system give the pages of [at, at + bytes) now (zeroed, or as they are where already
// given), not at their first writes; `at` need not start a page (its page is taken from its
// start). Linux 5.14 on; before, or if refused, or elsewhere, they come at their first writes.
inline void populate_pages(void* at, std::size_t bytes) {
#if defined(__linux__)
#if defined(MADV_POPULATE_WRITE)
  constexpr int kPopulateWrite = MADV_POPULATE_WRITE;
#else
  constexpr int kPopulateWrite = 23;  // its value in Linux's uapi headers
#endif
  const auto page = static_cast<std::uintptr_t>(sysconf(_SC_PAGESIZE));
  const auto from = reinterpret_cast<std::uintptr_t>(at) & ~(page - 1);
  const auto to = reinterpret_cast<std::uintptr_t>(at) + bytes;
  (void)madvise(reinterpret_cast<void*>(from), to - from, kPopulateWrite);
#else
  (void)at;
  (void)bytes;
#endif
}

inline uint64_t mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

inline uint64_t hash_bytes(std::string_view s) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t chunk;
    std::memcpy(&chunk, s.data() + i, 8);
    h = (h ^ chunk) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, s.data() + i, s.size() - i);
  return mix64(h ^ tail);
}

inline std::size_t table_capacity(std::size_t n) {
  std::size_t cap = 16;
  while (cap < 2 * n + 1) cap <<= 1;
  return cap;
}

// uint64 key -> uint64 value. Key ~0 is reserved (never a valid pair of 32-bit ids here). Key
// and value sit side by side, so a lookup touches one cache line.
class PairMap {
 public:
  static constexpr uint64_t kEmpty = ~uint64_t{0};

  void reserve(std::size_t n) {
    slots_.assign(table_capacity(n), Slot{kEmpty, 0});
    mask_ = slots_.size() - 1;
  }
  // Keeps the first value given for a key.
  void insert(uint64_t key, uint64_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    std::size_t i = mix64(key) & mask_;
    while (slots_[i].key != kEmpty) {
      if (slots_[i].key == key) return;
      i = (i + 1) & mask_;
    }
    slots_[i] = Slot{key, value};
    ++size_;
  }
  // Asks for the line where key's search starts, ahead of a find or insert.
  void prefetch(uint64_t key) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[mix64(key) & mask_]);
  }
  // Calls fn(key, value) for every entry, in no particular order.
  template <typename Fn>
  void for_each(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.key != kEmpty) fn(s.key, s.value);
    }
  }
  bool find(uint64_t key, uint64_t& value) const {
    if (slots_.empty()) return false;
    std::size_t i = mix64(key) & mask_;
    while (true) {
      const Slot& s = slots_[i];
      if (s.key == key) {
        value = s.value;
        return true;
      }
      if (s.key == kEmpty) return false;
      i = (i + 1) & mask_;
    }
  }

 private:
  struct Slot {
    uint64_t key;
    uint64_t value;
  };
  void grow() {
    LargeVector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != kEmpty) insert(s.key, s.value);
    }
  }
  LargeVector<Slot> slots_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

// byte string -> uint32 value (a vocabulary); the map owns a copy of every key. A slot is 16
// bytes, so a 200k-token vocabulary costs 8 MiB of slots rather than twice that. A key of up
// to 8 bytes sits in its slot (most tokens do); a longer one is in one arena, its slot holding
// its place there and 32 bits of its hash to skip most compares. (With every key in the arena,
// a lookup that found its key read a second line at another place: in a first pass over
// English, that miss was most of the time of a piece that is one token.)
class StringMap {
 public:
  void reserve(std::size_t n) {
    slots_.assign(table_capacity(n), Slot{});
    mask_ = slots_.size() - 1;
  }
  // Keeps the first value given for a key; false if the key was there already.
  bool insert(std::string_view key, uint32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    if (key.size() >= kEmpty) throw std::length_error("StringMap: a key of 4 GiB or more");
    const uint64_t full = hash_bytes(key);
    uint32_t unused = 0;
    std::size_t i = full & mask_;
    if (search(key, full, unused, i)) return false;
    Slot s;
    s.len = static_cast<uint32_t>(key.size());
    s.value = value;
    if (key.size() <= kInlineBytes) {
      s.word = inline_word(key.data(), key.size());
    } else {
      if (arena_.size() + key.size() >= kEmpty) {
        throw std::length_error("StringMap: keys exceed 4 GiB");
      }
      s.word = (full >> 32) << 32 | arena_.size();
      arena_.append(key.data(), key.size());
    }
    slots_[i] = s;
    ++size_;
    return true;
  }
  bool find(std::string_view key, uint32_t& value) const {
    return find(key, hash_bytes(key), value);
  }
  // The same, with the key's hash_bytes given (a caller that asked for its lines has it).
  bool find(std::string_view key, uint64_t full, uint32_t& value) const {
    if (slots_.empty()) return false;
    std::size_t i = full & mask_;
    return search(key, full, value, i);
  }
  // Asks for the line where the search of the key with hash_bytes `full` starts, ahead of a
  // find.
  void prefetch_hashed(uint64_t full) const {
    if (!slots_.empty()) __builtin_prefetch(&slots_[full & mask_]);
  }
  std::size_t size() const { return size_; }
  // Calls fn(key, value) for every entry, in no particular order.
  template <typename Fn>
  void for_each(Fn fn) const {
    for (const Slot& s : slots_) {
      if (s.len != kEmpty) fn(view(s), s.value);
    }
  }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};  // the length of an unused slot
  static constexpr std::size_t kInlineBytes = 8;
  struct Slot {
    // A key of up to kInlineBytes: its bytes, in order, zeros after them. A longer one: the
    // top 32 bits of its hash_bytes, over its offset in the arena.
    uint64_t word = 0;
    uint32_t len = kEmpty;
    uint32_t value = 0;
  };
  // The word of a key of up to kInlineBytes bytes: its bytes in memory order, zero-padded. On
  // little-endian machines made of two loads that may overlap (bytes read twice are or'ed with
  // themselves), not a copy of a variable length.
  static uint64_t inline_word(const char* p, std::size_t len) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const auto* b = reinterpret_cast<const unsigned char*>(p);
    if (len >= 4) {
      uint32_t lo = 0;
      uint32_t hi = 0;
      std::memcpy(&lo, b, 4);
      std::memcpy(&hi, b + len - 4, 4);
      return uint64_t{lo} | uint64_t{hi} << (8 * (len - 4));
    }
    if (len == 0) return 0;
    return uint64_t{b[0]} | uint64_t{b[len / 2]} << (8 * (len / 2)) |
           uint64_t{b[len - 1]} << (8 * (len - 1));
#else
    uint64_t w = 0;
    std::memcpy(&w, p, len);
    return w;
#endif
  }
  // Probes from slot i for key; true (value set) if found, else false with i at the empty
  // slot that ends the search.
  bool search(std::string_view key, uint64_t full, uint32_t& value, std::size_t& i) const {
    const auto len = static_cast<uint32_t>(key.size());
    if (key.size() <= kInlineBytes) {
      const uint64_t word = inline_word(key.data(), key.size());
      for (; slots_[i].len != kEmpty; i = (i + 1) & mask_) {
        if (slots_[i].len == len && slots_[i].word == word) {
          value = slots_[i].value;
          return true;
        }
      }
      return false;
    }
    const uint64_t high = full >> 32;
    for (; slots_[i].len != kEmpty; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.len == len && (s.word >> 32) == high &&
          std::memcmp(arena_.data() + (s.word & 0xFFFFFFFFu), key.data(), key.size()) == 0) {
        value = s.value;
        return true;
      }
    }
    return false;
  }
  std::string_view view(const Slot& s) const {
    if (s.len <= kInlineBytes) return {reinterpret_cast<const char*>(&s.word), s.len};
    return {arena_.data() + (s.word & 0xFFFFFFFFu), s.len};
  }
  void grow() {
    LargeVector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    size_ = 0;
    std::string arena = std::move(arena_);
    arena_.clear();
    for (const Slot& s : old) {
      if (s.len == kEmpty) continue;
      const std::string_view key =
          s.len <= kInlineBytes ? std::string_view(reinterpret_cast<const char*>(&s.word), s.len)
                                : std::string_view(arena.data() + (s.word & 0xFFFFFFFFu), s.len);
      insert(key, s.value);
    }
  }
  LargeVector<Slot> slots_;
  std::string arena_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace tokenmill
