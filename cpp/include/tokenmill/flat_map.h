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
// bytes (a 32-bit hash to skip most compares, the key's place in one arena, the value), so a
// 200k-token vocabulary costs 8 MiB of slots rather than twice that.
class StringMap {
 public:
  void reserve(std::size_t n) {
    slots_.assign(table_capacity(n), Slot{});
    mask_ = slots_.size() - 1;
  }
  // Keeps the first value given for a key; false if the key was there already.
  bool insert(std::string_view key, uint32_t value) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const uint64_t full = hash_bytes(key);
    const auto h = static_cast<uint32_t>(full);
    std::size_t i = full & mask_;
    while (slots_[i].offset != kEmpty) {
      if (slots_[i].hash == h && view(slots_[i]) == key) return false;
      i = (i + 1) & mask_;
    }
    if (arena_.size() + key.size() >= kEmpty || key.size() >= kEmpty) {
      throw std::length_error("StringMap: keys exceed 4 GiB");
    }
    slots_[i] = Slot{h, static_cast<uint32_t>(arena_.size()), static_cast<uint32_t>(key.size()),
                     value};
    arena_.append(key.data(), key.size());
    ++size_;
    return true;
  }
  bool find(std::string_view key, uint32_t& value) const {
    return find(key, hash_bytes(key), value);
  }
  // The same, with the key's hash_bytes given (a caller that asked for its lines has it).
  bool find(std::string_view key, uint64_t full, uint32_t& value) const {
    if (slots_.empty()) return false;
    const auto h = static_cast<uint32_t>(full);
    std::size_t i = full & mask_;
    while (slots_[i].offset != kEmpty) {
      const Slot& s = slots_[i];
      if (s.hash == h && s.len == key.size() &&
          std::memcmp(arena_.data() + s.offset, key.data(), key.size()) == 0) {
        value = s.value;
        return true;
      }
      i = (i + 1) & mask_;
    }
    return false;
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
      if (s.offset != kEmpty) fn(view(s), s.value);
    }
  }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};  // offset of an unused slot
  struct Slot {
    uint32_t hash = 0;
    uint32_t offset = kEmpty;
    uint32_t len = 0;
    uint32_t value = 0;
  };
  std::string_view view(const Slot& s) const { return {arena_.data() + s.offset, s.len}; }
  void grow() {
    LargeVector<Slot> old = std::move(slots_);
    reserve(old.empty() ? 8 : old.size());
    size_ = 0;
    std::string arena = std::move(arena_);
    arena_.clear();
    for (const Slot& s : old) {
      if (s.offset != kEmpty) insert(std::string_view(arena.data() + s.offset, s.len), s.value);
    }
  }
  LargeVector<Slot> slots_;
  std::string arena_;
  std::size_t mask_ = 0;
  std::size_t size_ = 0;
};

}  // namespace tokenmill
