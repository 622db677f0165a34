#include "tokenmill/bpe.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <memory>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"
#include "merge_lookup.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace tokenmill {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Up to this many symbols, a scan of the pair ranks per merge (two lookups each) beats a heap;
// beyond it the heap keeps long pieces O(n log n). Measured on Chinese (pieces of 20-100
// bytes): 48 beat 256 by a fifth.
constexpr std::size_t kHeapThreshold = 48;
// From this many symbols the bucket walk (bpe_long.cc), which costs a pass over every rank,
// beats the heap; tests lower it.
std::atomic<std::size_t> bucket_symbols{32768};
// From this many bytes a piece is cut by backtracking (bpe_backtrack.cc) when the vocabulary
// allows it. Its first use builds the tables (50 ms for cl100k_base, 130 ms for o200k_base),
// which only pays where the heap's O(n log n) would cost as much; tests lower it.
std::atomic<std::size_t> backtrack_bytes{32768};

// Up to this many tokens a piece-cache entry (below) holds ids of 18 bits, where the vocabulary
// is byte-level with up to 262,144 ids: seven in the id words, the eighth in the length word,
// whose ends are then the tokens' lengths. Most short pieces of Chinese are five tokens or more
// (a character is one or two).
constexpr std::size_t kPackedTokens = 8;
constexpr unsigned kPackedIdBits = 18;

std::atomic<uint64_t> next_serial{1};  // model serial numbers; 0 marks an empty cache slot

// BPEModel::token_filter_: 2^20 bits (128 KiB), two a token, from the top and the middle of
// its hash_bytes (the vocabulary's table takes the low bits). o200k_base's 200,000 tokens set
// a third of the bits, so one piece in nine that is no token gets past it.
constexpr int kTokenFilterBits = 20;
constexpr std::size_t kTokenFilterWords = (std::size_t{1} << kTokenFilterBits) / 64;
static_assert(2 * kTokenFilterBits <= 64, "the two bits come from disjoint parts of the hash");
inline uint64_t token_filter_bit(uint64_t hash, int which) {
  return (hash >> (64 - kTokenFilterBits * (which + 1))) &
         ((uint64_t{1} << kTokenFilterBits) - 1);
}

}  // namespace

uint16_t byte_symbol(unsigned char b) {
  static const auto table = [] {
    std::array<uint16_t, 256> cp{};
    uint16_t next = 256;
    for (int c = 0; c < 256; ++c) {
      const bool prints = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || c >= 174;
      cp[static_cast<std::size_t>(c)] = prints ? static_cast<uint16_t>(c) : next++;
    }
    return cp;
  }();
  return table[b];
}

bool decode_byte_alphabet(std::string_view token, std::string& out) {
  static const auto table = [] {  // code point -> byte, -1 for a character outside the alphabet
    std::vector<int> byte_of(256 + 68, -1);
    for (int b = 0; b < 256; ++b) byte_of[byte_symbol(static_cast<unsigned char>(b))] = b;
    return byte_of;
  }();
  out.clear();
  for (std::size_t i = 0; i < token.size();) {
    const std::size_t len = utf8_char_len(token, i);
    uint32_t cp = static_cast<unsigned char>(token[i]);
    if (len == 2) {
      cp = ((cp & 0x1Fu) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3Fu);
    } else if (len != 1 || cp >= 0x80) {
      return false;  // three- and four-byte characters are outside the alphabet
    }
    if (cp >= table.size() || table[cp] < 0) return false;
    out.push_back(static_cast<char>(table[cp]));
    i += len;
  }
  return true;
}


StringMap vocab_map(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids) {
  if (tokens.size() != ids.size()) throw Error("vocab tokens and ids differ in length");
  StringMap map;
  map.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) map.insert(tokens[i], ids[i]);
  return map;
}

std::vector<Merge> derive_merges(const std::vector<std::string>& tokens,
                                 const std::vector<uint32_t>& ranks,
                                 std::vector<uint32_t>& unreachable) {
  return derive_merges(vocab_map(tokens, ranks), tokens, ranks, unreachable);
}

// Tokens in rank order; each one's merge is found by merging its bytes by rank with the merges
// found so far (all of lower rank): a token that byte-pair merging can make ends as exactly two
// parts, and joining those is its merge. Keying the merges by id pairs makes each step two
// integer hashes rather than a string lookup per way of splitting the token.
std::vector<Merge> derive_merges(const StringMap& rank_of, const std::vector<std::string>& tokens,
                                 const std::vector<uint32_t>& ranks,
                                 std::vector<uint32_t>& unreachable) {
  if (tokens.size() != ranks.size()) throw Error("tokens and ranks differ in length");
  std::vector<std::size_t> order(tokens.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return ranks[a] < ranks[b];
  });
  int64_t byte_rank[256];
  for (int b = 0; b < 256; ++b) {
    uint32_t r = 0;
    byte_rank[b] = rank_of.find(std::string(1, static_cast<char>(b)), r) ? r : -1;
  }
  PairMap made;  // (left, right) -> the rank of the token they make
  made.reserve(tokens.size());
  std::vector<Merge> merges;
  merges.reserve(tokens.size());
  std::vector<uint32_t> parts;
  for (std::size_t k : order) {
    const std::string& token = tokens[k];
    if (token.size() < 2) continue;
    const uint32_t limit = ranks[k];
    parts.clear();
    for (char c : token) {
      const int64_t r = byte_rank[static_cast<unsigned char>(c)];
      if (r >= 0) parts.push_back(static_cast<uint32_t>(r));
    }
    if (parts.size() != token.size()) parts.clear();  // a byte without a rank: unreachable
    while (parts.size() > 2) {
      uint64_t best = kNoMerge;
      std::size_t at = 0;
      for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
        uint64_t rank = 0;
        if (made.find(pair_key(parts[i], parts[i + 1]), rank) && rank < best) {
          best = rank;
          at = i;
        }
      }
      if (best == kNoMerge) break;
      parts[at] = static_cast<uint32_t>(best);
      parts.erase(parts.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    }
    if (parts.size() != 2) {
      unreachable.push_back(limit);
      continue;
    }
    merges.push_back({parts[0], parts[1], limit});
    made.insert(pair_key(parts[0], parts[1]), limit);
  }
  return merges;
}

// A model's spare entries (BPEModel::spare_entries), zeroed; null where the memory is refused
// (keep_piece then writes over a full set's second way, as before them). Defined below
// PieceCacheEntry.
PieceCacheEntry* new_spare_entries();

BPEModel::BPEModel(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids,
                   const std::vector<Merge>& merges, BPEOptions options)
    : BPEModel(vocab_map(tokens, ids), merges, std::move(options)) {}

BPEModel::BPEModel(StringMap vocab, const std::vector<Merge>& merges, BPEOptions options)
    : options_(std::move(options)),
      serial_(next_serial.fetch_add(1)),
      vocab_(std::move(vocab)),
      word_cache_(options_.cache_capacity) {
  if (piece_cached()) {
    // Zeroed (empty entries, tag 0) and their pages taken now, before the model's other
    // tables (whose lines a first pass then finds in the caches): taken in a first pass, as
    // its pieces first met full sets, they cost it 3-5%.
    spare_entries_.reset(new_spare_entries());
  }
  merges_.reserve(merges.size());
  merge_count_ = merges.size();
  merges_build_up_ = merges_build_up(merges);
  pair_filter_.assign(kPairFilterWords, 0);
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    // The first rank given for a pair wins, as a later duplicate could never fire.
    const uint64_t key = pair_key(m.left, m.right);
    merges_.insert(key, (static_cast<uint64_t>(rank) << 32) | static_cast<uint64_t>(m.result));
    const uint64_t bit = pair_filter_bit(key);
    pair_filter_[bit >> 6] |= uint64_t{1} << (bit & 63);
  }
  if (options_.byte_symbols) check_token_lengths(merges);
  for (int b = 0; b < 256; ++b) {
    uint32_t id = 0;
    const std::string single(1, static_cast<char>(b));
    symbol_of_byte_[b] = options_.byte_symbols && lookup(single, id) ? id : -1;
  }
  ascii_merges_ = tokens_are_lengths_;
  for (int b = 0; b < 0x80; ++b) {
    const int64_t symbol = symbol_of_byte_[b];
    ascii_merges_ = ascii_merges_ && symbol >= 0 && symbol != options_.unk_id;
  }
  if (ascii_merges_) {
    ascii_pairs_.assign(std::size_t{1} << 14, kNoMerge);
    for (std::size_t pair = 0; pair < ascii_pairs_.size(); ++pair) {
      uint64_t packed = 0;
      if (merges_.find(pair_key(static_cast<uint32_t>(symbol_of_byte_[pair >> 7]),
                                static_cast<uint32_t>(symbol_of_byte_[pair & 0x7F])),
                       packed)) {
        ascii_pairs_[pair] = packed;
      }
    }
    if (options_.ignore_merges) {
      token_filter_.assign(kTokenFilterWords, 0);
      vocab_.for_each([this](std::string_view token, uint32_t) {
        const uint64_t hash = hash_bytes(token);
        for (const uint64_t bit : {token_filter_bit(hash, 0), token_filter_bit(hash, 1)}) {
          token_filter_[bit >> 6] |= uint64_t{1} << (bit & 63);
        }
      });
    }
  }
  if (options_.byte_symbols) build_char_starts(merges);
  build_char_table();
  // Byte fallback works character by character, as in Hugging Face: a character falls back
  // to <0xNN> tokens when every one of its bytes has one (a vocabulary may hold only some).
  have_bytes_ = false;
  if (options_.byte_fallback) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      uint32_t id = 0;
      byte_ids_[b] = lookup(name, id) ? static_cast<int64_t>(id) : -1;
      have_bytes_ = have_bytes_ || byte_ids_[b] >= 0;
    }
  }
}

bool BPEModel::may_be_token(uint64_t word_hash) const {
  const uint64_t a = token_filter_bit(word_hash, 0);
  const uint64_t b = token_filter_bit(word_hash, 1);
  return ((token_filter_[a >> 6] >> (a & 63)) & (token_filter_[b >> 6] >> (b & 63)) & 1) != 0;
}

bool BPEModel::lookup(std::string_view token, uint32_t& id) const {
  return vocab_.find(token, id);
}

namespace {
thread_local PairCacheEntry pair_cache[kPairCacheSize];
}  // namespace

PairCacheEntry* BPEModel::pair_cache_of_thread() { return pinned(&pair_cache[0]); }

std::size_t set_backtrack_bytes(std::size_t bytes) { return backtrack_bytes.exchange(bytes); }
std::size_t backtrack_threshold() { return backtrack_bytes.load(std::memory_order_relaxed); }
std::size_t set_bucket_symbols(std::size_t symbols) {
  return bucket_symbols.exchange(std::max<std::size_t>(symbols, 2));
}

void BPEModel::unknown_char(std::string_view ch, uint32_t ci, std::vector<Symbol>& syms) const {
  if (have_bytes_ && all_bytes_known(ch)) {
    // subtle: each byte token spans the whole character it came from, so offsets still
    // slice whole characters of the input.
    for (char c : ch) {
      const int64_t b = byte_ids_[static_cast<unsigned char>(c)];
      syms.push_back({static_cast<uint32_t>(b), ci, ci + 1});
    }
  } else if (options_.unk_id >= 0) {
    const auto unk = static_cast<uint32_t>(options_.unk_id);
    if (options_.fuse_unk && !syms.empty() && syms.back().id == unk && syms.back().end == ci) {
      syms.back().end = ci + 1;
    } else {
      syms.push_back({unk, ci, ci + 1});
    }
  }
}

bool BPEModel::all_bytes_known(std::string_view ch) const {
  for (char c : ch) {
    if (byte_ids_[static_cast<unsigned char>(c)] < 0) return false;
  }
  return true;
}

namespace {
inline uint32_t char_key(const char* p, std::size_t len) {
  uint32_t key = 0;
  std::memcpy(&key, p, len);  // (len <= 4: one character)
  return key;
}
inline std::size_t char_slot(uint32_t key, std::size_t mask) {
  return (static_cast<std::size_t>(key) * 0x9E3779B97F4A7C15ULL >> 32) & mask;
}
}  // namespace

void BPEModel::build_char_table() {
  char_table_ = !options_.byte_symbols && options_.continuing_subword_prefix.empty() &&
                options_.end_of_word_suffix.empty();
  if (!char_table_) return;
  std::fill(std::begin(ascii_char_ids_), std::end(ascii_char_ids_), kNoChar);
  std::vector<std::pair<uint32_t, uint32_t>> chars;  // (key, id) of the other characters
  vocab_.for_each([&](std::string_view token, uint32_t id) {
    if (token.empty() || utf8_char_len(token, 0) != token.size()) return;
    if (token.size() == 1 && static_cast<unsigned char>(token[0]) < 0x80) {
      ascii_char_ids_[static_cast<unsigned char>(token[0])] = id;
    } else {
      chars.emplace_back(char_key(token.data(), token.size()), id);
    }
  });
  std::size_t size = 16;
  while (size < 2 * chars.size()) size *= 2;
  char_slots_.assign(size, CharSlot{0, kNoChar});
  for (const auto& [key, id] : chars) {
    std::size_t i = char_slot(key, size - 1);
    while (char_slots_[i].id != kNoChar) i = (i + 1) & (size - 1);
    char_slots_[i] = {key, id};
  }
}

uint32_t BPEModel::char_id(const char* p, std::size_t len) const {
  const auto first = static_cast<unsigned char>(*p);
  if (first < 0x80) return ascii_char_ids_[first];
  const uint32_t key = char_key(p, len);
  const std::size_t mask = char_slots_.size() - 1;
  for (std::size_t i = char_slot(key, mask);; i = (i + 1) & mask) {
    const CharSlot& slot = char_slots_[i];
    if (slot.id == kNoChar) return kNoChar;
    if (slot.key == key) return slot.id;
  }
}

void BPEModel::initial_symbols(std::string_view word, std::vector<Symbol>& syms) const {
  if (options_.byte_symbols) {
    initial_byte_symbols(word, syms);
    return;
  }
  // Each character's token: by the character table, or (with a subword prefix or word
  // suffix) by its string as the model spells it there.
  const bool marker = options_.end_of_word_marker_id >= 0;
  const std::size_t n_chars = char_table_ ? 0 : utf8_count(word);
  std::string buf;
  uint32_t ci = 0;
  for (std::size_t i = 0; i < word.size(); ++ci) {
    const std::size_t len = utf8_char_len(word, i);
    const std::string_view ch = word.substr(i, len);
    uint32_t id = kNoChar;
    if (char_table_) {
      id = char_id(ch.data(), len);
    } else {
      buf.clear();
      if (ci > 0) buf += options_.continuing_subword_prefix;
      buf += ch;
      if (!marker && ci + 1 == n_chars) buf += options_.end_of_word_suffix;
      if (!lookup(buf, id)) id = kNoChar;
    }
    if (id != kNoChar) {
      syms.push_back({id, ci, ci + 1});
    } else {
      unknown_char(ch, ci, syms);
    }
    i += len;
  }
  if (marker && !word.empty()) {  // (ci: the word's characters)
    syms.push_back({static_cast<uint32_t>(options_.end_of_word_marker_id), ci, ci});
  }
}

namespace {
// The leftmost of the least of ranks[0, count) (count >= 1): where, and (best) which.
inline std::size_t least_rank(const uint64_t* ranks, std::size_t count, uint64_t& best) {
  std::size_t at = 0;
  best = ranks[0];
  for (std::size_t i = 1; i < count; ++i) {
    if (ranks[i] < best) {  // strict: the leftmost pair wins a tie
      best = ranks[i];
      at = i;
    }
  }
  return at;
}
}  // namespace

void BPEModel::apply_merges(std::vector<Symbol>& syms) const {
  PairCacheEntry* const cache = pair_cache;
  if (syms.size() >= bucket_symbols.load(std::memory_order_relaxed)) {
    apply_merges_buckets(syms, cache);
    return;
  }
  if (syms.size() > kHeapThreshold) {
    apply_merges_heap(syms);
    return;
  }
  // The rank (and result) of each adjacent pair, computed once and updated only beside a
  // merge: a merge costs one scan of this short array and two lookups.
  const std::size_t n = syms.size();
  if (n < 2) return;
  uint64_t ranks[kHeapThreshold];
  auto pair_rank = [&](std::size_t i) -> uint64_t {
    uint32_t rank = 0;
    uint32_t result = 0;
    if (!find_merge(syms[i].id, syms[i + 1].id, rank, result, cache)) return ~uint64_t{0};
    return (static_cast<uint64_t>(rank) << 32) | result;
  };
  std::size_t size = n;
  for (std::size_t i = 0; i + 1 < size; ++i) ranks[i] = pair_rank(i);
  while (size > 1) {
    uint64_t best_rank = 0;
    const std::size_t best = least_rank(ranks, size - 1, best_rank);
    if (best_rank == ~uint64_t{0}) break;
    syms[best].id = static_cast<uint32_t>(best_rank & 0xFFFFFFFFu);
    syms[best].end = syms[best + 1].end;
    for (std::size_t i = best + 1; i + 1 < size; ++i) {
      syms[i] = syms[i + 1];
      ranks[i] = ranks[i + 1];
    }
    --size;
    if (best + 1 < size) ranks[best] = pair_rank(best);
    if (best > 0) ranks[best - 1] = pair_rank(best - 1);
  }
  syms.resize(size);
}

// O(n log n): a min-heap of candidate merges keyed by (rank, position) over a linked list of
// symbols. Entries go stale when a neighbour merges; they are recognised on pop by checking that
// both symbols are still adjacent and still hold the ids the entry was made for.
// With rng (BPE-dropout), each live candidate popped is skipped with probability `dropout`;
// skipped candidates return to the heap after the next merge, so each step draws afresh, as
// the paper defines it. Stale entries are dropped before any draw.
void BPEModel::apply_merges_heap(std::vector<Symbol>& syms, double dropout,
                                 uint64_t* rng) const {
  PairCacheEntry* const cache = pair_cache;
  struct Candidate {
    uint32_t rank;
    uint32_t left;
    uint32_t right;
    uint32_t left_id;
    uint32_t right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  const std::size_t n = syms.size();
  std::vector<uint32_t> next(n);
  std::vector<uint32_t> prev(n);
  std::vector<char> alive(n, 1);
  const auto none = static_cast<uint32_t>(n);
  for (std::size_t i = 0; i < n; ++i) {
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = i == 0 ? none : static_cast<uint32_t>(i - 1);
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  std::vector<Candidate> skipped;
  auto consider = [&](uint32_t left, uint32_t right) {
    if (left == none || right == none) return;
    uint32_t rank = 0;
    uint32_t result = 0;
    if (find_merge(syms[left].id, syms[right].id, rank, result, cache)) {
      heap.push({rank, left, right, syms[left].id, syms[right].id});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    consider(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1));
  }
  // A uniform draw in [0, 1) from the top 53 bits.
  auto draw = [&] { return static_cast<double>(splitmix64(*rng) >> 11) * 0x1.0p-53; };
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        syms[c.left].id != c.left_id || syms[c.right].id != c.right_id) {
      continue;
    }
    if (rng != nullptr && draw() < dropout) {
      skipped.push_back(c);
      continue;
    }
    uint32_t rank = 0;
    uint32_t result = 0;
    find_merge(c.left_id, c.right_id, rank, result, cache);
    syms[c.left].id = result;
    syms[c.left].end = syms[c.right].end;
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] != none) prev[next[c.right]] = c.left;
    for (const Candidate& s : skipped) heap.push(s);
    skipped.clear();
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (alive[i]) syms[out++] = syms[i];
  }
  syms.resize(out);
}

void BPEModel::encode_word_dropout(std::string_view word, double dropout, uint64_t& rng,
                                   std::vector<TokenSpan>& out) const {
  if (word.empty()) return;
  uint32_t whole = 0;
  if (options_.ignore_merges && lookup(word, whole)) {  // as encode_word: no merges to drop
    const std::size_t len = options_.byte_symbols ? word.size() : utf8_count(word);
    out.push_back({whole, 0, static_cast<uint32_t>(len)});
    return;
  }
  std::vector<Symbol> syms;
  syms.reserve(word.size() + 1);
  initial_symbols(word, syms);
  apply_merges_heap(syms, dropout, &rng);
  for (const Symbol& s : syms) out.push_back({s.id, s.start, s.end});
}

// A cache of short pieces and their tokens, one 64-byte line each, shared by all threads: the
// pieces of ordinary text repeat (" the", ",", " of"), and finding one here costs a hash of at
// most 32 bytes and one line, where the vocabulary costs misses to memory. Byte-level models
// only, pieces of up to 32 bytes whose (up to 4, or 8 with kPackedIdBits-bit ids) tokens cover
// their bytes end to end (each token's span is then where the previous one ended up to its own
// end, which fits in a byte).
//
// Threads read and write entries without a lock, as a sequence lock: a writer makes the
// entry's version odd, writes, and makes it even again; a reader copies the entry and keeps the
// copy only if the version was even and unchanged around it. (Per-thread caches, tried first,
// started empty in every thread: two threads missed nearly twice as often as one.)
namespace {
constexpr std::size_t kPieceKeyBytes = BPEModel::kPieceCacheBytes;
constexpr std::size_t kPieceTokens = 4;
constexpr unsigned kWordCacheMark = 0xFF;  // an entry's token count: "in the word cache"
// An entry's token count: "the ids are in the model's long_entry_ids_" (keep_long_entry).
constexpr unsigned kLongEntryMark = 0xFE;
// Sets of two lines: 8 MiB in use at first, 32 MiB once the first quarter has lost enough
// pieces to others that met them in a full set (kPieceGrowAfter).
constexpr unsigned kPieceCacheBits = 18;
constexpr uint64_t kFirstPieceSets = uint64_t{1} << 16;
}  // namespace
struct alignas(64) PieceCacheEntry {
  // [0]: version << 32 | the model's tag (piece_tag; 0: empty), version odd while written
  // [1..4]: the piece's bytes, zero-padded
  // [5]: length | count << 8 | (end of token k) << (16 + 8k)
  // [6]: id 0 | id 1 << 32; [7]: id 2 | id 3 << 32
  // or, for 5 to 8 tokens (kPackedTokens): [5] length | count << 8 | id 7 << 16, and ids 0-6
  // at 18 bits each from bit 0 of [6] on into [7]
  // or, for more (a long entry): [5] length | kLongEntryMark << 8 | count << 16, and [6] the
  // place of the ids in the model's long_entry_ids_ (counted from its start, over its wraps)
  std::atomic<uint64_t> word[8];
};
static_assert(sizeof(PieceCacheEntry) == 64, "one cache line per piece");
// Two lines a hash (a direct-mapped cache lost a frequent piece to every rare one that shared
// its line: with 50,000 distinct pieces in 8 MB of English, 3% of lookups missed after the
// first pass). A new piece takes the first way while it is free, else the second: the first
// pieces of a text, the frequent ones, stay.
struct alignas(128) PieceCacheSet {
  PieceCacheEntry way[2];
};

// The key of a piece of up to 32 bytes (piece_key): its bytes, zero-padded, and their hash.
struct PieceKey {
  uint64_t word[4];
  uint64_t hash;
};
namespace {

#if defined(__linux__)
// Whether the system may back memory asked for with MADV_HUGEPAGE with 2 MiB pages (its
// setting is "always" or "madvise", not "never"; false if it cannot be read).
bool huge_pages_on() {
  std::FILE* f = std::fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f == nullptr) return false;
  char setting[128] = {};
  const std::size_t got = std::fread(setting, 1, sizeof(setting) - 1, f);
  std::fclose(f);
  setting[got] = '\0';
  return got > 0 && std::strstr(setting, "[never]") == nullptr;
}
#endif

// The cache, allocated on first use, never freed (threads may use it until the process ends).
// On Linux it is fresh zeroed pages from mmap, asked to be 2 MiB ones: every lookup lands on a
// random line of the table, and with 4 KiB pages most also missed the TLB. The first quarter's
// pages are taken with the table where those are 2 MiB pages (below), else as they are first
// written, so a process that encodes little does not hold the whole table; one whose pieces fit
// in the first quarter never touches the rest.
PieceCacheSet* shared_piece_cache() {
  static PieceCacheSet* const cache = [] {
    constexpr std::size_t kSets = std::size_t{1} << kPieceCacheBits;
    constexpr std::size_t kBytes = sizeof(PieceCacheSet) * kSets;
#if defined(__linux__)
    constexpr std::size_t kHugePage = kHugePageBytes;
    static_assert(kBytes % kHugePage == 0, "the table is whole huge pages");
    void* mapped = mmap(nullptr, kBytes + kHugePage, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped != MAP_FAILED) {
      // The table starts on a huge-page boundary (the slack before it is never touched).
      const auto at = (reinterpret_cast<std::uintptr_t>(mapped) + kHugePage - 1) & ~(kHugePage - 1);
      void* table = reinterpret_cast<void*>(at);
#if defined(MADV_HUGEPAGE)
      madvise(table, kBytes, MADV_HUGEPAGE);  // a hint: the kernel may keep small pages
#endif
      // On 2 MiB pages, the first quarter's four are all written within the first few dozen
      // distinct pieces any process meets (each at a line at random; one sentence of ten
      // pieces took all four): they are taken now, with the table, rather than by the first
      // distinct pieces of a text. (The system zeroes each as it gives it: on this VM, 1 to
      // 17 ms for the four, which a first pass over 4 MB of English paid inside its 40 to 80
      // ms.) On small pages the table keeps its pages to the pieces' lines, as before.
      if (huge_pages_on()) {
        populate_pages(table, kFirstPieceSets * sizeof(PieceCacheSet));
        // Then read through, a word a line: the system zeroes pages past the caches, where a
        // first pass then met each set it looked up (half of them, over 4 MB of English) as
        // a miss to memory. Read in order, the 8 MiB take 0.4 ms here (the first encode of a
        // process 1.6 -> 2.0 ms); a first pass over English ran 5% faster.
        const auto* words = static_cast<const volatile uint64_t*>(table);
        uint64_t sum = 0;
        constexpr std::size_t kWords = kFirstPieceSets * sizeof(PieceCacheSet) / 8;
        for (std::size_t w = 0; w < kWords; w += 8) sum += words[w];
        (void)sum;
      }
      // Zeroed pages are empty entries (tag 0). Default-initialised, so nothing is written
      // (C++17's std::atomic has a trivial default constructor).
      return new (table) PieceCacheSet[kSets];
    }
#endif
    void* memory = ::operator new[](kBytes, std::align_val_t{alignof(PieceCacheSet)});
    return new (memory) PieceCacheSet[kSets]();
  }();
  return cache;
}

// A model's tag in the piece cache: never 0, and distinct for 2^32 - 1 models in a row.
uint32_t piece_tag(uint64_t serial) { return static_cast<uint32_t>(serial % 0xFFFFFFFFu) + 1; }

inline uint64_t piece_hash(const PieceKey& k, std::size_t len) {
  return ((k.word[0] * 0x9E3779B97F4A7C15ULL) ^ (k.word[1] * 0xC2B2AE3D27D4EB4FULL) ^
          (k.word[2] * 0x165667B19E3779F9ULL) ^ (k.word[3] * 0x27D4EB2F165667C5ULL) ^ len) *
         0xFF51AFD7ED558CCDULL;
}

// The key of the piece text[begin, begin + len), len <= 32. Read as words straight from the
// text (masked) when they are inside it, which spares a variable-length copy and the
// store-to-load stall after it.
inline void piece_key(std::string_view text, std::size_t begin, std::size_t len, PieceKey& k) {
  if (kLittleEndian && len <= 8 && begin + 8 <= text.size()) {
    // Most pieces (" the", ","): one word read, the other three zero (their multiplies in the
    // hash fold away here).
    std::memcpy(k.word, text.data() + begin, 8);
    k.word[0] &= low_bytes(len);
    k.word[1] = k.word[2] = k.word[3] = 0;
    k.hash = piece_hash(k, len);
    return;
  }
  if (kLittleEndian && begin + kPieceKeyBytes <= text.size()) {
    std::memcpy(k.word, text.data() + begin, kPieceKeyBytes);
    for (std::size_t w = 0; w < 4; ++w) k.word[w] &= low_bytes(len > 8 * w ? len - 8 * w : 0);
  } else {
    k.word[0] = k.word[1] = k.word[2] = k.word[3] = 0;
    std::memcpy(k.word, text.data() + begin, len);
  }
  k.hash = piece_hash(k, len);
}

// Whether the key's piece is ASCII (its padding is zeros).
inline bool key_is_ascii(const PieceKey& k) {
  return ((k.word[0] | k.word[1] | k.word[2] | k.word[3]) & 0x8080808080808080ULL) == 0;
}

constexpr uint64_t kVersionOne = uint64_t{1} << 32;  // an entry's version step

// A set's number is 16 bits of its piece's hash (bits 46 to 61) at first, kPieceCacheBits (46
// to 63) once the table has grown, which it does once, after kPieceGrowAfter pieces lost their
// place: a piece's set is then the one it had, or one 2^16, 2^17 or 3 * 2^16 sets on. The mask
// is of the set's offset in bytes, so a lookup costs no instruction more than a table of one
// size. An entry is found by its key wherever it is, so a batch that read the mask before the
// change still finds and writes entries correctly. (Grown to twice, 16 MiB, the table still
// had sets that three or more of the 150,000 distinct short pieces of text in 26 languages
// met, and a pass over that text seen before merged the pieces left out again; grown to four
// times, such a pass ran 20% faster.)
constexpr unsigned kSetBytesLog2 = 7;
static_assert(sizeof(PieceCacheSet) == std::size_t{1} << kSetBytesLog2, "a set's size");
constexpr uint64_t kFirstPieceMask = (kFirstPieceSets - 1) << kSetBytesLog2;
constexpr uint64_t kGrownPieceMask = ((uint64_t{1} << kPieceCacheBits) - 1) << kSetBytesLog2;
std::atomic<uint64_t> piece_set_mask{kFirstPieceMask};
// Pieces whose entry went to a set with both ways taken by the same model (one of them lost),
// counted until the table grows, at an eighth of the first sets. 4 MB of English, some 32,000
// distinct pieces, lose about 1,900 in their first pass and 2,500 in each pass after it (a set
// of two ways that three of its pieces meet); text in 26 languages, 150,000 distinct short
// pieces, gets there before halfway through its first pass.
std::atomic<uint64_t> piece_losses{0};
constexpr uint64_t kPieceGrowAfter = kFirstPieceSets / 8;

// The table and the mask of its sets in use, read once for a batch of pieces.
struct PieceTable {
  PieceCacheSet* sets;
  uint64_t mask;
};
inline PieceTable piece_table() {
  return {shared_piece_cache(), piece_set_mask.load(std::memory_order_relaxed)};
}

inline PieceCacheSet& piece_slot(const PieceTable& table, const PieceKey& k) {
  const uint64_t offset = (k.hash >> (64 - kPieceCacheBits - kSetBytesLog2)) & table.mask;
  return *reinterpret_cast<PieceCacheSet*>(reinterpret_cast<char*>(table.sets) + offset);
}

// Whether an entry is in the set its key's hash names now: not a copy left in the first quarter
// when the table grew, nor an entry written there by a batch that had read the old mask. Such
// an entry is never met again and is written over as if its way were free. (Read without the
// entry's version: a writer at it may make the answer wrong, which costs a piece its entry or
// its place, no more.)
inline bool entry_in_place(const PieceCacheEntry& e, const PieceCacheSet& set,
                           const PieceTable& table) {
  if (table.mask == kFirstPieceMask) return true;
  constexpr auto relaxed = std::memory_order_relaxed;
  PieceKey k;
  for (std::size_t w = 0; w < 4; ++w) k.word[w] = e.word[1 + w].load(relaxed);
  k.hash = piece_hash(k, e.word[5].load(relaxed) & 0xFF);
  return &piece_slot(table, k) == &set;
}

// The entry's length/ends word and ids if it holds key for the model, read whole (a writer
// may be at it: then it does not count).
inline bool piece_read(const PieceCacheEntry& e, uint32_t tag, const PieceKey& k, std::size_t len,
                       uint64_t& meta, uint64_t& ids01, uint64_t& ids23) {
  constexpr auto relaxed = std::memory_order_relaxed;
  const uint64_t head = e.word[0].load(std::memory_order_acquire);
  if (static_cast<uint32_t>(head) != tag || (head & kVersionOne) != 0) return false;
  if (e.word[1].load(relaxed) != k.word[0]) return false;
  // A piece of up to 8 bytes is its first word: an entry of the same length that agrees there
  // holds zeros after it too (checked with the length below).
  if (len > 8 && (e.word[2].load(relaxed) != k.word[1] || e.word[3].load(relaxed) != k.word[2] ||
                  e.word[4].load(relaxed) != k.word[3])) {
    return false;
  }
  meta = e.word[5].load(relaxed);
  ids01 = e.word[6].load(relaxed);
  ids23 = e.word[7].load(relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  return e.word[0].load(relaxed) == head && (meta & 0xFF) == len;
}

// Writes an entry unless another thread is writing it.
inline void piece_write(PieceCacheEntry& e, uint32_t tag, const PieceKey& k, uint64_t meta,
                        uint64_t ids01, uint64_t ids23) {
  constexpr auto relaxed = std::memory_order_relaxed;
  uint64_t head = e.word[0].load(relaxed);
  if ((head & kVersionOne) != 0 ||
      !e.word[0].compare_exchange_strong(head, head + kVersionOne, std::memory_order_acquire,
                                         relaxed)) {
    return;
  }
  std::atomic_thread_fence(std::memory_order_release);
  for (std::size_t w = 0; w < 4; ++w) e.word[1 + w].store(k.word[w], relaxed);
  e.word[5].store(meta, relaxed);
  e.word[6].store(ids01, relaxed);
  e.word[7].store(ids23, relaxed);
  const uint64_t version = (head >> 32) + 2;
  e.word[0].store((version << 32) | tag, std::memory_order_release);
}

// An entry's contents read whole, as piece_read does (false for an empty one or one a writer
// is at): its model's tag, its piece's key (with the hash), its length/ends word and ids.
inline bool piece_take(const PieceCacheEntry& e, uint32_t& tag, PieceKey& k, uint64_t& meta,
                       uint64_t& ids01, uint64_t& ids23) {
  constexpr auto relaxed = std::memory_order_relaxed;
  const uint64_t head = e.word[0].load(std::memory_order_acquire);
  if (static_cast<uint32_t>(head) == 0 || (head & kVersionOne) != 0) return false;
  for (std::size_t w = 0; w < 4; ++w) k.word[w] = e.word[1 + w].load(relaxed);
  meta = e.word[5].load(relaxed);
  ids01 = e.word[6].load(relaxed);
  ids23 = e.word[7].load(relaxed);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (e.word[0].load(relaxed) != head) return false;
  k.hash = piece_hash(k, meta & 0xFF);
  tag = static_cast<uint32_t>(head);
  return true;
}

}  // namespace

// Entries moved out of full sets, to be written to their spare entries (keep_piece).
struct SpareMoves {
  // (No initializers: a batch's array of them costs nothing until a move is written.)
  struct Move {
    PieceCacheEntry* to;
    uint32_t tag;
    PieceKey key;
    uint64_t meta;
    uint64_t ids01;
    uint64_t ids23;
    void write() const { piece_write(*to, tag, key, meta, ids01, ids23); }
  };
  static constexpr std::size_t kMoves = BPEModel::kPieceBatch;
  Move move[kMoves];
  std::size_t count = 0;
  void flush() {
    for (std::size_t i = 0; i < count; ++i) move[i].write();
    count = 0;
  }
};

namespace {

// Opens the rest of the table. Each entry of the first quarter (of any model) whose piece's set
// is now in another quarter is copied there first, so growing costs no piece its entry (a first
// pass went on to meet most pieces of the text so far as new). Run once, by the thread whose
// loss reached kPieceGrowAfter, while the others go on in the first quarter (the rest has no
// other writer until the mask is stored).
void grow_piece_table() {
  PieceCacheSet* const sets = shared_piece_cache();
  const PieceTable grown{sets, kGrownPieceMask};
  constexpr uint64_t kQuarters = (uint64_t{1} << kPieceCacheBits) / kFirstPieceSets;
  for (uint64_t s = 0; s < kFirstPieceSets; ++s) {
    std::size_t used[kQuarters] = {};  // ways written in each set s + q * kFirstPieceSets
    for (const PieceCacheEntry& e : sets[s].way) {
      uint32_t tag = 0;
      PieceKey k;
      uint64_t meta = 0, ids01 = 0, ids23 = 0;
      if (!piece_take(e, tag, k, meta, ids01, ids23)) continue;  // (one being written is left)
      PieceCacheSet& to = piece_slot(grown, k);
      // (q < kQuarters by the grown mask; q is 0 for a piece that stays, and another set than
      // s's in quarter q is an entry out of place, left there)
      const auto q = static_cast<uint64_t>(&to - sets) / kFirstPieceSets;
      if (q == 0 || &to != &sets[s + q * kFirstPieceSets]) continue;
      piece_write(to.way[used[q]++], tag, k, meta, ids01, ids23);
    }
  }
  piece_set_mask.store(kGrownPieceMask, std::memory_order_release);
}

// Counts a piece lost from a full set, and grows the table at the kPieceGrowAfter-th.
inline void count_piece_loss() {
  if (piece_losses.fetch_add(1, std::memory_order_relaxed) + 1 == kPieceGrowAfter) {
    grow_piece_table();
  }
}

// Batches merged without the piece cache in this process (piece_cache_skipped_batches).
std::atomic<std::size_t> skipped_batches{0};

}  // namespace

// (Once a text, not once a batch: threads encoding random text side by side would pass the
// count's line between them at every batch.)
PieceMisses::~PieceMisses() {
  if (skipped != 0) skipped_batches.fetch_add(skipped, std::memory_order_relaxed);
}

std::size_t piece_cache_skipped_batches() {
  return skipped_batches.load(std::memory_order_relaxed);
}

std::size_t piece_cache_sets() {
  const uint64_t mask = piece_set_mask.load(std::memory_order_relaxed);
  return static_cast<std::size_t>((mask >> kSetBytesLog2) + 1);
}

bool BPEModel::piece_cached() const {
  return options_.byte_symbols && options_.cache_capacity > 0;
}

namespace {
// Where a batch's pieces are. Either (start, end) pairs, bounds[2k, 2k + 1], which may leave
// bytes out between pieces (a pattern that drops some) ...
struct PiecePairs {
  static constexpr bool kLongPieces = false;  // the caller cuts those by backtracking
  const uint32_t* bounds;
  std::size_t begin(std::size_t k) const { return bounds[2 * k]; }
  std::size_t end(std::size_t k) const { return bounds[2 * k + 1]; }
  PiecePairs after(std::size_t n) const { return {bounds + 2 * n}; }
};
// ... or the ends of pieces that follow one another, as the scanner gives them: piece k is
// [ends[k - 1], ends[k]), ends[-1] the first one's start (read, so it must be there).
struct PieceRun {
  static constexpr bool kLongPieces = true;  // encode_run_ids cuts those by backtracking
  const std::size_t* ends;
  std::size_t begin(std::size_t k) const { return ends[k - 1]; }
  std::size_t end(std::size_t k) const { return ends[k]; }
  PieceRun after(std::size_t n) const { return {ends + n}; }
};

// Piece k of a batch: its offsets are inside text, as the scanner found them (encode_text's
// contract), and the piece is taken without substr's check and clamp.
template <typename Bounds>
inline std::string_view piece_at(std::string_view text, const Bounds& bounds, std::size_t k) {
  return {text.data() + bounds.begin(k), bounds.end(k) - bounds.begin(k)};
}

// The key of piece k, if it fits in the cache, and its set's lines asked for (not for an ASCII
// piece of ask_below bytes or more, which is not looked for there).
template <typename Bounds>
inline void key_piece(std::string_view text, const Bounds& bounds, std::size_t k,
                      const PieceTable& cache, PieceKey* keys,
                      std::size_t ask_below = kPieceKeyBytes + 1) {
  const std::size_t len = bounds.end(k) - bounds.begin(k);
  if (len == 0 || len > kPieceKeyBytes) return;
  piece_key(text, bounds.begin(k), len, keys[k]);
  if (len >= ask_below && key_is_ascii(keys[k])) return;
  // Both lines of the set: a piece not in the first way is looked for in the second, whose line
  // nothing else asks for ahead. (Asked for at the lookup, it waited on memory: three quarters
  // of the lookup's time over new base64, where the second way is read for every piece; a
  // megabyte of it went 28.5 -> 22.8 ms, and 26 languages seen before 62.5 -> 60 ms.)
  const PieceCacheSet& set = piece_slot(cache, keys[k]);
  __builtin_prefetch(&set.way[0]);
  __builtin_prefetch(&set.way[1]);
}

// The keys of the first (up to kPieceBatch) pieces that fit in the cache, both lines of each
// one's set asked for; returns how many pieces that is.
inline std::size_t key_pieces(std::string_view text, const uint32_t* bounds, std::size_t count,
                              const PieceTable& cache,
                              PieceKey (&keys)[BPEModel::kPieceBatch]) {
  const std::size_t n = std::min(count, BPEModel::kPieceBatch);
  for (std::size_t k = 0; k < n; ++k) key_piece(text, PiecePairs{bounds}, k, cache, keys);
  return n;
}

// How many pieces ahead of the one being looked up the ids path asks for cache lines: far
// enough for a line to arrive from memory, few enough for the misses in flight.
constexpr std::size_t kLookAhead = 16;

// The tokens of key's piece if the set holds them for this model: meta (length, count, ends or
// an id) and the id words (up to four ids, or seven packed).
inline bool piece_find(const PieceCacheSet& set, uint32_t tag, const PieceKey& key,
                       std::size_t len, uint64_t& meta, uint64_t (&ids)[2]) {
  if (piece_read(set.way[0], tag, key, len, meta, ids[0], ids[1])) return true;
  // A set whose first way was never written holds nothing in its second (keep_piece and the
  // growth write the second only once the first is taken, and a written head is never 0
  // again), so the second's line is not read: in a first pass most sets a piece meets are
  // such sets.
  if (set.way[0].word[0].load(std::memory_order_relaxed) == 0) return false;
  return piece_read(set.way[1], tag, key, len, meta, ids[0], ids[1]);
}

// Whether both ways of a set hold entries of the model (tag): a piece not found there may
// then have its entry among the model's spare ones (keep_piece moves the second way's entry
// there when a newer piece takes its place).
inline bool set_full(const PieceCacheSet& set, uint32_t tag) {
  constexpr auto relaxed = std::memory_order_relaxed;
  return static_cast<uint32_t>(set.way[0].word[0].load(relaxed)) == tag &&
         static_cast<uint32_t>(set.way[1].word[0].load(relaxed)) == tag;
}

// The spare entry of a key's piece (BPEModel::spare_entries): by bits 32 to 43 of its hash,
// which the piece's set does not use (46 to 63); the low bits of the hash, a product, would
// follow the piece's first two bytes alone. 4,096 entries: a pass over 4 MB of English or code
// moves 1,100 to 2,300 entries out of full sets; with 16,384, text in 26 languages read 11%
// faster a second time but first passes 2-5% slower (more of their moves to cold lines).
constexpr std::size_t kSpareEntries = std::size_t{1} << 12;
inline PieceCacheEntry& spare_entry(PieceCacheEntry* entries, const PieceKey& k) {
  return entries[(k.hash >> 32) & (kSpareEntries - 1)];
}

// piece_find, then the spare entries where the set is full.
inline bool piece_find_or_spare(const PieceCacheSet& set, PieceCacheEntry* spare, uint32_t tag,
                                const PieceKey& key, std::size_t len, uint64_t& meta,
                                uint64_t (&ids)[2]) {
  if (piece_find(set, tag, key, len, meta, ids)) return true;
  return spare != nullptr && set_full(set, tag) &&
         piece_read(spare_entry(spare, key), tag, key, len, meta, ids[0], ids[1]);
}

// Token k of a cache entry's two id words.
inline uint32_t entry_id(const uint64_t (&ids)[2], unsigned k) {
  return static_cast<uint32_t>(ids[k / 2] >> (32 * (k % 2)));
}
inline unsigned entry_count(uint64_t meta) { return static_cast<unsigned>((meta >> 8) & 0xFF); }
inline bool entry_packed(unsigned count) { return count > kPieceTokens && count <= kPackedTokens; }
// Token k of an entry of packed ids.
inline uint32_t packed_id(uint64_t meta, const uint64_t (&ids)[2], unsigned k) {
  constexpr uint64_t mask = (uint64_t{1} << kPackedIdBits) - 1;
  if (k == kPackedTokens - 1) return static_cast<uint32_t>((meta >> 16) & mask);
  const unsigned bit = kPackedIdBits * k;
  uint64_t v = 0;
  if (bit >= 64) {
    v = ids[1] >> (bit - 64);
  } else {
    v = ids[0] >> bit;
    if (bit + kPackedIdBits > 64) v |= ids[1] << (64 - bit);
  }
  return static_cast<uint32_t>(v & mask);
}
// Puts id as token k of an entry of packed ids (packed_id's inverse; the fields start zeroed).
inline void set_packed_id(uint64_t& meta, uint64_t (&ids)[2], unsigned k, uint64_t id) {
  const unsigned bit = kPackedIdBits * k;
  if (k == kPackedTokens - 1) {
    meta |= id << 16;
  } else if (bit >= 64) {
    ids[1] |= id << (bit - 64);
  } else {
    ids[0] |= id << bit;
    if (bit + kPackedIdBits > 64) ids[1] |= id >> (64 - bit);
  }
}
// Writes an entry's ids (at most kPackedTokens) at out; returns how many. An entry of up to
// kPieceTokens ids writes all kPieceTokens slots (out must have room for them): one 16-byte
// copy, where a loop over the count was 3.3M instructions of a pass over 1 MB of English.
inline unsigned put_entry_ids(uint64_t meta, const uint64_t (&ids)[2], uint32_t* out) {
  const unsigned count = entry_count(meta);
  if (entry_packed(count)) {
    for (unsigned t = 0; t < count; ++t) out[t] = packed_id(meta, ids, t);
    return count;
  }
  if constexpr (kLittleEndian) {
    // Two 8-byte copies through registers, never one of 16: the id words were stored just
    // before, one at a time (piece_read), and a 16-byte load over two stores still in flight
    // cannot take its bytes from them; it waited for both to reach the cache (on text seen
    // before, a third of the time of encode_ids_of).
    const uint64_t low = pinned(ids[0]);
    const uint64_t high = pinned(ids[1]);
    std::memcpy(out, &low, sizeof(low));
    std::memcpy(out + 2, &high, sizeof(high));
  } else {
    for (unsigned t = 0; t < kPieceTokens; ++t) out[t] = entry_id(ids, t);
  }
  return std::min(count, static_cast<unsigned>(kPieceTokens));
}

// Moves the spans out[from, end) on by `by` bytes.
inline void shift_spans(std::vector<TokenSpan>& out, std::size_t from, uint32_t by) {
  for (std::size_t k = from; k < out.size(); ++k) {
    out[k].start += by;
    out[k].end += by;
  }
}
}  // namespace

// The piece text[begin, begin + len), len <= 32, through the piece cache; spans relative to the
// piece, as encode_word gives them.
void BPEModel::encode_short_piece(std::string_view piece, uint32_t offset, const PieceKey& key,
                                  PieceCacheSet& set, std::vector<TokenSpan>& out) const {
  uint64_t meta = 0;
  uint64_t ids[2] = {0, 0};
  if (!piece_find_or_spare(set, spare_entries(), piece_tag(serial_), key, piece.size(), meta,
                           ids)) {
    encode_missed_piece(piece, offset, key, set, out);
    return;
  }
  const unsigned count = entry_count(meta);
  if (count == kWordCacheMark) {
    encode_marked_piece(piece, offset, out);
    return;
  }
  if (count == kLongEntryMark) {
    uint32_t kept[kPieceKeyBytes];
    const unsigned n = read_long_entry(meta, ids, kept);
    if (n == 0) {
      // Written over since (or not a place of the array's): merged, and kept again.
      encode_missed_piece(piece, offset, key, set, out);
    } else {
      push_end_to_end(kept, n, offset, out);
    }
    return;
  }
  if (entry_packed(count)) {
    uint32_t unpacked[kPackedTokens];
    for (unsigned t = 0; t < count; ++t) unpacked[t] = packed_id(meta, ids, t);
    push_end_to_end(unpacked, count, offset, out);
    return;
  }
  uint32_t start = offset;
  for (unsigned t = 0; t < count; ++t) {
    const uint32_t end = offset + static_cast<uint32_t>((meta >> (16 + 8 * t)) & 0xFF);
    out.push_back({entry_id(ids, t), start, end});
    start = end;
  }
}

// A piece whose entry says its tokens are in the word cache.
void BPEModel::encode_marked_piece(std::string_view piece, uint32_t offset,
                                   std::vector<TokenSpan>& out) const {
  const std::size_t first = out.size();
  // Kept there before the mark was written; gone only if another model shared the tag (2^32
  // models on): then merged.
  if (!find_cached_word(piece, hash_bytes(piece), out)) encode_word_uncached(piece, out);
  shift_spans(out, first, offset);
}

// A short piece the cache does not hold: merged, and its entry written when it can have one.
void BPEModel::encode_missed_piece(std::string_view piece, uint32_t offset, const PieceKey& key,
                                   PieceCacheSet& set, std::vector<TokenSpan>& out) const {
  const std::size_t first = out.size();
  encode_word_uncached(piece, out);
  const std::size_t count = out.size() - first;
  bool end_to_end = count <= kPieceKeyBytes;
  uint32_t tok[kPieceKeyBytes];
  uint32_t ends[kPieceKeyBytes];
  uint32_t at = 0;
  for (std::size_t k = 0; end_to_end && k < count; ++k) {
    end_to_end = out[first + k].start == at;  // else a byte has no token
    at = out[first + k].end;
    tok[k] = out[first + k].id;
    ends[k] = at;
  }
  if (end_to_end && at == piece.size()) keep_piece(piece, key, set, tok, ends, count);
  shift_spans(out, first, offset);
}

void BPEModel::keep_piece(std::string_view piece, const PieceKey& key, PieceCacheSet& set,
                          const uint32_t* tok, const uint32_t* ends, std::size_t count,
                          SpareMoves* moves) const {
  uint64_t meta = 0;
  uint64_t ids[2] = {0, 0};
  // (Byte-level: each token as long as its bytes, but for the unknown token.)
  auto no_unknown = [&] {
    return std::find(tok, tok + count, static_cast<uint32_t>(options_.unk_id)) == tok + count;
  };
  uint64_t at = 0;  // a long entry's place
  if (count <= kPieceTokens) {
    meta = piece.size() | count << 8;
    for (std::size_t k = 0; k < count; ++k) {
      meta |= static_cast<uint64_t>(ends[k]) << (16 + 8 * k);
      ids[k / 2] |= static_cast<uint64_t>(tok[k]) << (32 * (k % 2));
    }
  } else if (count <= kPackedTokens && packed_ids_ && no_unknown()) {
    meta = piece.size() | count << 8;
    for (std::size_t k = 0; k < count; ++k) {
      set_packed_id(meta, ids, static_cast<unsigned>(k), tok[k]);
    }
  } else if (tokens_are_lengths_ && no_unknown() && keep_long_entry(tok, count, at)) {
    // Too many tokens for an entry: they go to the model's array of long entries, and the entry
    // says where. (Before, a Chinese piece of 9 to 23 tokens was merged again at every meeting:
    // in a profile of a pass over Chinese seen before, that merging was 30% of the time.)
    meta = piece.size() | uint64_t{kLongEntryMark} << 8 | uint64_t{count} << 16;
    ids[0] = at;
  } else if (key_is_ascii(key)) {
    // No ring (it could not be had, or the tokens are not their bytes). An ASCII piece (a long
    // identifier, a run of symbols) was merged byte by byte, microseconds of work: it goes to
    // the word cache, and the entry says to look there. Other pieces start from whole
    // characters and merge again nearly as fast as the word cache finds them (keeping Chinese
    // ones there made a first pass over Chinese 13% slower, for 10% on a second); and a piece
    // the word cache has no room for gets no entry (it would only send each meeting to a
    // failed search before the merging).
    TokenSpan spans[kPieceKeyBytes];  // an ASCII piece has at most a token a byte
    for (std::size_t k = 0; k < count; ++k) spans[k] = {tok[k], k == 0 ? 0 : ends[k - 1], ends[k]};
    if (!keep_cached_word(piece, spans, count)) return;
    meta = piece.size() | uint64_t{kWordCacheMark} << 8;
  } else {
    return;
  }
  const uint32_t tag = piece_tag(serial_);
  // A way is taken if it holds an entry of the model that can still be met, and for a long
  // entry, whose ids are still in the array (so a piece whose ids were written over takes
  // back its own way, not the other one).
  const PieceTable table = piece_table();
  auto taken = [&](const PieceCacheEntry& e) {
    if (static_cast<uint32_t>(e.word[0].load(std::memory_order_relaxed)) != tag ||
        !entry_in_place(e, set, table)) {
      return false;
    }
    const uint64_t m = e.word[5].load(std::memory_order_relaxed);
    return entry_count(m) != kLongEntryMark ||
           long_entry_held(e.word[6].load(std::memory_order_relaxed));
  };
  const bool first_taken = taken(set.way[0]);
  if (first_taken && taken(set.way[1])) {
    if (table.mask == kFirstPieceMask) count_piece_loss();
    // Both ways hold pieces met before this one, which takes the second as before (the piece
    // met last, the likelier to come again soon: code repeats its names close together).
    // The one there moves to its spare entry, where a lookup that finds the set full finds it.
    // (Lost, it was merged again when next met, and took the way back: 2,300 pieces in each
    // pass over 4 MB of English seen before.)
    PieceCacheEntry* const spare = spare_entries();
    SpareMoves::Move move;
    if (spare != nullptr &&
        piece_take(set.way[1], move.tag, move.key, move.meta, move.ids01, move.ids23)) {
      move.to = &spare_entry(spare, move.key);
      if (moves != nullptr && moves->count < SpareMoves::kMoves) {
        // (Its line is cold: written at once, the entry's version check waited on it, a fifth
        // of a microsecond a move, 2% of a first pass over code.)
        __builtin_prefetch(move.to, 1);
        moves->move[moves->count++] = move;
      } else {
        move.write();
      }
    }
  }
  piece_write(set.way[first_taken ? 1 : 0], tag, key, meta, ids[0], ids[1]);
}

void BPEModel::SpareEntriesFree::operator()(PieceCacheEntry* entries) const { delete[] entries; }

PieceCacheEntry* new_spare_entries() {
  return new (std::nothrow) PieceCacheEntry[kSpareEntries]();
}

// The array is a ring: a long entry takes the next count slots, or if they would pass the end,
// the first count (the slots of the oldest entries, which are then read as gone). Places are
// counted from the start over every wrap (long_entry_next_, 64 bits); a slot holds its id and
// the lap of the place it was written for (place / kLongEntryIds + 1, in the high half).
// A reader takes a slot's id only if its lap is the entry's: one written over since, by a
// later lap (or by a writer of an earlier one that was slow to write), reads as gone, and so
// does the whole entry. Each slot is one atomic word, so a copy is never torn within a slot,
// and needs no other order than the entry's (written after its slots: piece_write's release,
// piece_read's acquire).
namespace {
inline uint64_t long_entry_lap(uint64_t place) {
  return place / BPEModel::kLongEntryIds + 1;
}
}  // namespace

bool BPEModel::keep_long_entry(const uint32_t* ids, std::size_t count, uint64_t& place) const {
  std::call_once(long_entry_once_, [this] {
    // Not zeroed (std::atomic's default constructor is trivial in C++17): its pages are taken
    // as they are first written. (A zero slot is of no lap.)
    long_entry_ids_.reset(new (std::nothrow) std::atomic<uint64_t>[kLongEntryIds]);
  });
  if (long_entry_ids_ == nullptr || count == 0 || count > kLongEntryIds) return false;
  uint64_t next = long_entry_next_.load(std::memory_order_relaxed);
  uint64_t at = 0;
  do {
    at = next;
    const std::size_t offset = static_cast<std::size_t>(at % kLongEntryIds);
    if (count > kLongEntryIds - offset) at += kLongEntryIds - offset;  // from the start
  } while (!long_entry_next_.compare_exchange_weak(next, at + count,
                                                    std::memory_order_relaxed));
  const uint64_t lap = long_entry_lap(at) << 32;
  std::atomic<uint64_t>* const to = long_entry_ids_.get() + at % kLongEntryIds;
  for (std::size_t k = 0; k < count; ++k) to[k].store(lap | ids[k], std::memory_order_relaxed);
  place = at;
  return true;
}

bool BPEModel::long_entry_held(uint64_t place) const {
  // (What the writers have taken since; a slow writer of a lap before may still write over.)
  return long_entry_next_.load(std::memory_order_relaxed) - place <= kLongEntryIds;
}

unsigned BPEModel::read_long_entry(uint64_t meta, const uint64_t (&ids)[2], uint32_t* out) const {
  const std::size_t length = meta & 0xFF;
  const std::size_t count = (meta >> 16) & 0xFF;
  const uint64_t place = ids[0];
  // The checks keep an entry that is not one of this model's (a tag shared 2^32 models on)
  // inside the array, and its ids within the piece's room (at most one a byte).
  const std::atomic<uint64_t>* const kept = long_entry_ids_.get();
  const std::size_t offset = static_cast<std::size_t>(place % kLongEntryIds);
  if (kept == nullptr || count == 0 || count > length || count > kLongEntryIds - offset) {
    return 0;
  }
  const uint64_t lap = long_entry_lap(place);
  uint64_t other = 0;  // any bit of a lap that is not the entry's
  for (std::size_t k = 0; k < count; ++k) {
    const uint64_t slot = kept[offset + k].load(std::memory_order_relaxed);
    other |= (slot >> 32) ^ lap;
    out[k] = static_cast<uint32_t>(slot);
  }
  return other == 0 ? static_cast<unsigned>(count) : 0;
}

std::size_t BPEModel::encode_missed_ascii(std::string_view piece, const PieceKey& key,
                                          PieceCacheSet& set, uint32_t* tok, uint64_t word_hash,
                                          SpareMoves* moves) const {
  uint32_t ends[kPieceKeyBytes];
  const std::size_t count = ascii_tokens(piece, tok, ends, word_hash);
  keep_piece(piece, key, set, tok, ends, count, moves);
  return count;
}

std::size_t BPEModel::ascii_tokens(std::string_view piece, uint32_t* tok, uint32_t* ends,
                                   uint64_t word_hash) const {
  // (The filter first: over new base64 nearly every piece of four bytes or more is no token,
  // and its line of the vocabulary was one more miss to memory.)
  if (options_.ignore_merges && may_be_token(word_hash) &&
      vocab_.find(piece, word_hash, tok[0])) {
    ends[0] = static_cast<uint32_t>(piece.size());
    return 1;
  }
  return merge_ascii(piece, tok, ends);
}

// apply_merges' scan on a piece of at most 32 bytes, whose symbols are its bytes: ids and ends
// in arrays of four bytes, not symbols of twelve in a vector.
std::size_t BPEModel::merge_ascii(std::string_view piece, uint32_t* tok, uint32_t* ends) const {
  const std::size_t n = piece.size();
  for (std::size_t i = 0; i < n; ++i) {
    tok[i] = static_cast<uint32_t>(symbol_of_byte_[static_cast<unsigned char>(piece[i])]);
    ends[i] = static_cast<uint32_t>(i + 1);
  }
  if (n < 2) return n;
  uint64_t ranks[kPieceKeyBytes];
  // (Not through the pair cache: the pairs these pieces make after their first merges are
  // mostly new to it, and a lookup that missed there read a line, wrote one, and only then
  // probed the table. Without it, first passes ran 7% (cl100k_base English and code) to 12%
  // (o200k_base English) faster, and base64 a little; the backtracking search keeps it.)
  auto pair_rank = [&](std::size_t i) { return merge_of(tok[i], tok[i + 1]); };
  const uint64_t* const byte_pairs = ascii_pairs_.data();
  auto byte_pair = [&](std::size_t at) {
    return byte_pairs[std::size_t{static_cast<unsigned char>(piece[at])} << 7 |
                      static_cast<unsigned char>(piece[at + 1])];
  };
  for (std::size_t i = 0; i + 1 < n; ++i) ranks[i] = byte_pair(i);
  std::size_t size = n;
  while (size > 1) {
    uint64_t best_rank = 0;
    const std::size_t best = least_rank(ranks, size - 1, best_rank);
    if (best_rank == kNoMerge) break;
    tok[best] = static_cast<uint32_t>(best_rank & 0xFFFFFFFFu);
    ends[best] = ends[best + 1];
    for (std::size_t i = best + 1; i + 1 < size; ++i) {
      tok[i] = tok[i + 1];
      ends[i] = ends[i + 1];
      ranks[i] = ranks[i + 1];
    }
    --size;
    if (best + 1 < size) ranks[best] = pair_rank(best);
    if (best > 0) ranks[best - 1] = pair_rank(best - 1);
  }
  return size;
}

void BPEModel::encode_word(std::string_view word, std::vector<TokenSpan>& out) const {
  if (word.empty()) return;
  if (!options_.word_mark.empty()) {
    encode_marked_word(word, out);
    return;
  }
  if (!piece_cached() || word.size() > kPieceKeyBytes) {
    encode_word_uncached(word, out);
    return;
  }
  PieceKey key;
  piece_key(word, 0, word.size(), key);
  encode_short_piece(word, 0, key, piece_slot(piece_table(), key), out);
}

// A SentencePiece text is one piece ("▁The▁cat"): merged whole, each merge scans or heaps
// every symbol of a sentence, and no sentence repeats for a cache. Cut into its words, each is
// merged once and then found in the word cache.
void BPEModel::encode_marked_word(std::string_view word, std::vector<TokenSpan>& out) const {
  const std::string_view mark = options_.word_mark;
  auto at_mark = [&](std::size_t i) {
    return i + mark.size() <= word.size() && word.compare(i, mark.size(), mark) == 0;
  };
  // (before a mark that follows another character: a run of marks stays whole)
  auto cut = [&](std::size_t i) {
    return at_mark(i) && !(i >= mark.size() && at_mark(i - mark.size()));
  };
  encode_in_parts(word, cut, [this](std::string_view part, std::vector<TokenSpan>& spans) {
    encode_word_uncached(part, spans);
  }, out);
}

void BPEModel::encode_pieces(std::string_view text, const uint32_t* bounds, std::size_t count,
                             std::vector<TokenSpan>& out) const {
  if (!piece_cached()) {
    for (std::size_t k = 0; k < count; ++k) {
      const std::size_t first = out.size();
      encode_word(text.substr(bounds[2 * k], bounds[2 * k + 1] - bounds[2 * k]), out);
      shift_spans(out, first, bounds[2 * k]);
    }
    return;
  }
  // Two passes: the first hashes every short piece and asks for its cache line, the second
  // finds the lines there (a miss to memory each, one after the other, cost most of the time).
  const PieceTable cache = piece_table();
  PieceKey keys[kPieceBatch];
  const std::size_t n = key_pieces(text, bounds, count, cache, keys);
  for (std::size_t k = 0; k < n; ++k) {
    const uint32_t begin = bounds[2 * k];
    const std::string_view piece = text.substr(begin, bounds[2 * k + 1] - begin);
    if (piece.size() > kPieceKeyBytes) {
      const std::size_t first = out.size();
      encode_word_uncached(piece, out);
      shift_spans(out, first, begin);
    } else if (!piece.empty()) {
      encode_short_piece(piece, begin, keys[k], piece_slot(cache, keys[k]), out);
    }
  }
  if (count > n) encode_pieces(text, bounds + 2 * n, count - n, out);
}

namespace {

// encode_ids_of's spans of pieces the cache does not hold, kept by each thread.
[[gnu::noinline]] std::vector<TokenSpan>& miss_spans() {
  thread_local std::vector<TokenSpan> spans;
  return spans;
}

}  // namespace

template <typename Bounds>
void BPEModel::encode_ids_of(std::string_view text, const Bounds& bounds, std::size_t count,
                             std::vector<uint32_t>& ids, PieceMisses* misses) const {
  // The spans of pieces the cache does not hold, kept by each thread; reached only for such a
  // piece (a reach of a thread-local in this library is a call, which a batch of pieces all
  // found in the cache made for nothing).
  std::vector<TokenSpan>* spans_kept = nullptr;
  auto scratch = [&spans_kept]() -> std::vector<TokenSpan>& {
    if (spans_kept == nullptr) spans_kept = &miss_spans();
    return *spans_kept;
  };
  // Pieces this long are cut by backtracking here (for a PieceRun; pairs come without them).
  const std::size_t long_piece = Bounds::kLongPieces ? backtrack_threshold() : ~std::size_t{0};
  if (!piece_cached()) {
    std::vector<TokenSpan>& spans = scratch();
    spans.clear();
    auto spans_to_ids = [&] {
      for (const TokenSpan& s : spans) ids.push_back(s.id);
      spans.clear();
    };
    for (std::size_t k = 0; k < count; ++k) {
      const std::string_view piece = piece_at(text, bounds, k);
      if (piece.size() >= long_piece) {
        spans_to_ids();
        if (encode_long_ids(piece, ids)) continue;
      }
      encode_word(piece, spans);
    }
    spans_to_ids();
    if (spans.capacity() > kScratchKept) std::vector<TokenSpan>().swap(spans);
    return;
  }
  // As encode_pieces; a piece found in the cache gives the ids of its entry, with no spans.
  const PieceTable cache = piece_table();
  const uint32_t tag = piece_tag(serial_);
  PieceKey keys[kPieceBatch];
  const std::size_t n = std::min(count, kPieceBatch);
  // A batch of random text merges its ASCII pieces of PieceMisses::kLeastBytes or more without
  // the cache (PieceMisses): each was a miss to memory for a set, an entry written there, and
  // an entry of the model's moved out for it; over new base64, a fifth of the time (a
  // megabyte, o200k_base: 22.8 -> 18 ms), and the cache kept nothing that was met again.
  const bool skip = ascii_merges_ && misses != nullptr && misses->skip > 0;
  const std::size_t ask_below = skip ? PieceMisses::kLeastBytes : kPieceKeyBytes + 1;
  // Pieces of PieceMisses::kLeastBytes or more found in the cache, and ASCII ones not found
  std::size_t long_found = 0;
  std::size_t ascii_missed = 0;
  for (std::size_t k = 0; k < std::min(n, kLookAhead); ++k) {
    key_piece(text, bounds, k, cache, keys, ask_below);
  }
  // The cache is read for every piece first (the lines of the piece kLookAhead on asked for at
  // each step; not for the pieces a skipping batch merges without it), and the vocabulary's
  // lines asked for the pieces it does not hold, so the misses of a batch wait for memory
  // together, not one by one.
  struct Found {
    uint64_t meta;  // 0: not in the cache
    uint64_t ids[2];
  };
  Found found[kPieceBatch];
  PieceCacheEntry* const spare = spare_entries();
  SpareMoves moves;  // (written after the batch's pieces)
  // hash_bytes of a piece the cache does not hold (or that a skipping batch does not look for
  // there), made once for the prefetch of its line in the vocabulary (or the word cache), the
  // token filter, and its lookup there
  uint64_t word_hash[kPieceBatch];
  // Ids found in the cache gather here and join `ids` in one copy (before anything else is
  // appended there): a push_back a token, its capacity check and its store of the vector's end,
  // were a tenth of the instructions of a pass over English seen before.
  // (So do the ids of ASCII pieces merged here, at most one a byte.)
  // (kPieceTokens more: put_entry_ids writes that many for an entry of fewer)
  uint32_t gathered[kPieceBatch * kPieceKeyBytes + kPieceTokens];
  std::size_t gathered_count = 0;
  auto hand_over = [&] {
    ids.insert(ids.end(), gathered, gathered + gathered_count);
    gathered_count = 0;
  };
  // A piece's ids straight from its entry or the long entries' array (at most one a byte of
  // the piece); false if it has none (not found, or in the word cache).
  auto emit_found = [&](const Found& f) {
    if (f.meta == 0) return false;
    if (entry_count(f.meta) > kPackedTokens) {  // (one test on the way of the common entries)
      if (entry_count(f.meta) != kLongEntryMark) return false;  // in the word cache
      const unsigned kept = read_long_entry(f.meta, f.ids, gathered + gathered_count);
      gathered_count += kept;
      return kept != 0;
    }
    gathered_count += put_entry_ids(f.meta, f.ids, gathered + gathered_count);
    return true;
  };
  // Pieces found before the first that is not are emitted at once (on text seen before, that
  // is every piece), the rest once the ones before them are merged.
  std::size_t emitted = 0;
  for (std::size_t k = 0; k < n; ++k) {
    if (k + kLookAhead < n) key_piece(text, bounds, k + kLookAhead, cache, keys, ask_below);
    const std::string_view piece = piece_at(text, bounds, k);
    found[k].meta = 0;
    if (piece.empty()) {
      emitted += emitted == k;
      continue;
    }
    if (skip && piece.size() >= PieceMisses::kLeastBytes && piece.size() <= kPieceKeyBytes &&
        key_is_ascii(keys[k])) {
      // (Only ignore_merges looks the piece up whole: without it the hash is never read.)
      word_hash[k] = options_.ignore_merges ? hash_bytes(piece) : 0;
      if (options_.ignore_merges && may_be_token(word_hash[k])) {
        vocab_.prefetch_hashed(word_hash[k]);
      }
      continue;
    }
    // (A spare entry is read here, not put off with the misses: the table is small enough to
    // be found in the core's caches, and a piece read from it later would have put off every
    // piece after it in the batch; a pass over code seen before reads 9,000 pieces there.)
    if (piece.size() > kPieceKeyBytes ||
        !piece_find_or_spare(piece_slot(cache, keys[k]), spare, tag, keys[k], piece.size(),
                             found[k].meta, found[k].ids)) {
      found[k].meta = 0;
      // (not for a piece that backtracking cuts: the line would wait for a hash of it all)
      if (piece.size() < long_piece || piece.size() <= kPieceKeyBytes) {
        word_hash[k] = hash_bytes(piece);
      }
      if (piece.size() < long_piece) vocab_.prefetch_hashed(word_hash[k]);
      if (piece.size() > kPieceKeyBytes && word_cacheable(piece)) {
        // A long piece's key is its hash (for the word cache, whose line is asked for too).
        keys[k].hash = piece.size() < long_piece ? word_hash[k] : hash_bytes(piece);
        word_cache_.prefetch(keys[k].hash);
      }
    } else {
      // (ASCII or not: near enough.) A found piece is of 32 bytes at most, so this is 1 for one
      // of kLeastBytes or more, and 0 for one shorter, without a compare that the compiler
      // might make a branch: taken for every piece, unpredictable in code and English.
      static_assert(PieceMisses::kLeastBytes >= 1 &&
                        kPieceKeyBytes + 64 - PieceMisses::kLeastBytes < 128,
                    "1 for a found piece of kLeastBytes or more, else 0");
      long_found += (piece.size() + (64 - PieceMisses::kLeastBytes)) >> 6;
      if (emitted == k && emit_found(found[k])) emitted = k + 1;
    }
  }
  for (std::size_t k = emitted; k < n; ++k) {
    const std::string_view piece = piece_at(text, bounds, k);
    if (piece.empty() || emit_found(found[k])) continue;
    if (found[k].meta == 0 && piece.size() <= kPieceKeyBytes && ascii_merges_ &&
        key_is_ascii(keys[k])) {
      // (Counted here, among the misses, not where every piece is looked for: with tests of
      // length and of ASCII there, the compiler branched on them before each lookup, which
      // code and English made unpredictable: a pass over code seen before went a fifth slower.)
      const bool skippable = piece.size() >= PieceMisses::kLeastBytes;
      ascii_missed += skippable;
      if (skip && skippable) {
        uint32_t ends[kPieceKeyBytes];
        gathered_count += ascii_tokens(piece, gathered + gathered_count, ends, word_hash[k]);
      } else {
        gathered_count += encode_missed_ascii(piece, keys[k], piece_slot(cache, keys[k]),
                                              gathered + gathered_count, word_hash[k], &moves);
      }
      continue;
    }
    hand_over();
    if (found[k].meta != 0 && entry_count(found[k].meta) != kLongEntryMark) {
      // Marked: its tokens are in the word cache (kept there before the mark was written).
      if (!find_cached_ids(piece, ids)) encode_word_ids(piece, ids, scratch());
      continue;
    }
    if (piece.size() > kPieceKeyBytes) {
      if (piece.size() >= long_piece && encode_long_ids(piece, ids)) continue;
      encode_word_ids(piece, ids, scratch(), word_cacheable(piece) ? &keys[k].hash : nullptr);
      continue;
    }
    std::vector<TokenSpan>& spans = scratch();
    spans.clear();
    encode_missed_piece(piece, 0, keys[k], piece_slot(cache, keys[k]), spans);
    for (const TokenSpan& s : spans) ids.push_back(s.id);
  }
  hand_over();
  moves.flush();
  if (spans_kept != nullptr && spans_kept->capacity() > kScratchKept) {
    std::vector<TokenSpan>().swap(*spans_kept);
  }
  if (misses != nullptr && ascii_merges_) {
    if (skip) {
      --misses->skip;
      ++misses->skipped;
    } else if (long_found + ascii_missed < 8) {
      // too few to tell: the streak stays as it is
    } else if (ascii_missed * 16 >= (long_found + ascii_missed) * 15) {
      if (++misses->streak >= PieceMisses::kMissStreak) misses->skip = PieceMisses::kMissSkip;
    } else {
      misses->streak = 0;
    }
  }
  if (count > n) encode_ids_of(text, bounds.after(n), count - n, ids, misses);
}

void BPEModel::encode_pieces_ids(std::string_view text, const uint32_t* bounds, std::size_t count,
                                 std::vector<uint32_t>& ids, PieceMisses* misses) const {
  encode_ids_of(text, PiecePairs{bounds}, count, ids, misses);
}

void BPEModel::encode_run_ids(std::string_view text, const std::size_t* ends, std::size_t count,
                              std::vector<uint32_t>& ids, PieceMisses* misses) const {
  encode_ids_of(text, PieceRun{ends}, count, ids, misses);
}

// With the piece cache, the words that come here cacheable are over 32 bytes (runs of Chinese
// between punctuation), rarely a token, and nearly all in the word cache once met: it is looked
// in before the vocabulary. (A word it holds was merged, so it is not a token by itself: with
// ignore_merges, a token returns before merging.) Without the piece cache every word comes
// here, and most words of ordinary text are one token: the vocabulary first. Both searches take
// the same hash.
bool BPEModel::word_cache_first(bool cacheable) const { return cacheable && piece_cached(); }

void BPEModel::encode_word_uncached(std::string_view word, std::vector<TokenSpan>& out) const {
  const bool cacheable = word_cacheable(word);
  const uint64_t hash = cacheable ? hash_bytes(word) : 0;
  const bool cache_first = word_cache_first(cacheable);
  if (cache_first && find_cached_word(word, hash, out)) return;
  uint32_t whole = 0;
  if (options_.ignore_merges &&
      (cacheable ? vocab_.find(word, hash, whole) : lookup(word, whole))) {
    const std::size_t len = options_.byte_symbols ? word.size() : utf8_count(word);
    out.push_back({whole, 0, static_cast<uint32_t>(len)});
    return;
  }
  if (cacheable && !cache_first && find_cached_word(word, hash, out)) return;
  merge_word(word, out, cacheable ? &hash : nullptr);
}

void BPEModel::encode_word_ids(std::string_view word, std::vector<uint32_t>& ids,
                               std::vector<TokenSpan>& scratch, const uint64_t* known) const {
  // The searches in encode_word_uncached's order.
  const bool cacheable = word_cacheable(word);
  const uint64_t hash = !cacheable ? 0 : known != nullptr ? *known : hash_bytes(word);
  const bool cache_first = word_cache_first(cacheable);
  WordCache::Found found;
  if (cache_first && word_cache_.find(word, hash, found)) {
    ids.insert(ids.end(), found.ids, found.ids + found.count);
    return;
  }
  uint32_t whole = 0;
  if (options_.ignore_merges &&
      (cacheable ? vocab_.find(word, hash, whole) : lookup(word, whole))) {
    ids.push_back(whole);
    return;
  }
  if (cacheable && !cache_first && word_cache_.find(word, hash, found)) {
    ids.insert(ids.end(), found.ids, found.ids + found.count);
    return;
  }
  scratch.clear();
  merge_word(word, scratch, cacheable ? &hash : nullptr);
  for (const TokenSpan& s : scratch) ids.push_back(s.id);
}

// The word cache serves the models whose short pieces skip the piece cache, and, for the others,
// the pieces too long for it: most of Chinese and Japanese (runs of characters between
// punctuation), runs of indentation and comment rulers in code. Finding one costs a hash and a
// comparison; keeping a new one, a copy of its bytes and ids. On 4 MB of Chinese with
// cl100k_base (alternated runs), a first pass was 10% slower for it (its records take fresh
// memory, which this machine gives slowly), a second 53% faster.
bool BPEModel::word_cacheable(std::string_view word) const {
  return options_.cache_capacity > 0 && (!piece_cached() || word.size() > kPieceKeyBytes) &&
         word.size() <= WordCache::kMaxWordBytes;
}

void BPEModel::merge_word(std::string_view word, std::vector<TokenSpan>& out,
                          const uint64_t* keep_hash) const {
  if (word.size() >= backtrack_threshold()) {
    const Backtrack* bt = backtrack();
    if (bt != nullptr && encode_backtrack(*bt, word, out, pair_cache)) return;
  }
  // This thread's symbols, kept from word to word (two allocations a word cost a tenth of the
  // time of a pass over English whose pieces are all new).
  thread_local std::vector<Symbol> syms;
  syms.clear();
  reserve_more(syms, word.size() + 1);  // (a symbol a byte at most; pages not written cost nothing)
  initial_symbols(word, syms);
  apply_merges(syms);
  const std::size_t first = out.size();
  reserve_more(out, syms.size());
  for (const Symbol& s : syms) out.push_back({s.id, s.start, s.end});
  if (syms.capacity() > kScratchKept) std::vector<Symbol>().swap(syms);
  if (keep_hash != nullptr && !word_cache_.full()) {
    word_cache_.keep(word, *keep_hash, out.data() + first, out.size() - first,
                     spans_are_token_lengths(out.data() + first, out.size() - first));
  }
}

// Whether every merge's result is a token as long as its two parts together (so a byte-level
// model's tokens cover as many bytes as they are long); and then whether every id is below
// 2^kPackedIdBits.
void BPEModel::check_token_lengths(const std::vector<Merge>& merges) {
  std::vector<uint32_t> length_of;  // each id's token length + 1 (0: no token)
  vocab_.for_each([&length_of](std::string_view token, uint32_t id) {
    if (id >= length_of.size()) length_of.resize(std::size_t{id} + 1, 0);
    length_of[id] = static_cast<uint32_t>(token.size()) + 1;
  });
  auto length = [&length_of](uint32_t id) -> uint64_t {
    return id < length_of.size() ? length_of[id] : 0;
  };
  tokens_are_lengths_ = true;
  for (const Merge& m : merges) {
    const uint64_t left = length(m.left), right = length(m.right), result = length(m.result);
    if (left == 0 || right == 0 || result == 0 || result + 1 != left + right) {
      tokens_are_lengths_ = false;
      break;
    }
  }
  packed_ids_ = tokens_are_lengths_ && length_of.size() <= (std::size_t{1} << kPackedIdBits);
}

bool BPEModel::spans_are_token_lengths(const TokenSpan* tokens, std::size_t count) const {
  // A byte-level model's tokens are the bytes they cover (when its merges put their parts
  // together), but for its unknown token.
  if (!tokens_are_lengths_) return false;
  for (std::size_t k = 0; k < count; ++k) {
    if (static_cast<int64_t>(tokens[k].id) == options_.unk_id) return false;
  }
  return true;
}

bool BPEModel::find_cached_word(std::string_view word, uint64_t hash,
                                std::vector<TokenSpan>& out) const {
  WordCache::Found found;
  if (!word_cache_.find(word, hash, found)) return false;
  if (found.spans != nullptr) {
    for (std::size_t k = 0; k < found.count; ++k) {
      out.push_back({found.ids[k], found.spans[k] & 0xFFFFu, found.spans[k] >> 16});
    }
    return true;
  }
  push_end_to_end(found.ids, found.count, 0, out);
  return true;
}

void BPEModel::push_end_to_end(const uint32_t* ids, std::size_t count, uint32_t start,
                               std::vector<TokenSpan>& out) const {
  // Tokens end to end over a byte-level piece: each ends its token's length on.
  const std::vector<std::string_view>& token_of_id = tokens_by_id();
  for (std::size_t k = 0; k < count; ++k) {
    const uint32_t end = start + static_cast<uint32_t>(token_of_id[ids[k]].size());
    out.push_back({ids[k], start, end});
    start = end;
  }
}

bool BPEModel::find_cached_ids(std::string_view word, std::vector<uint32_t>& ids) const {
  WordCache::Found found;
  if (!word_cache_.find(word, hash_bytes(word), found)) return false;
  ids.insert(ids.end(), found.ids, found.ids + found.count);
  return true;
}

bool BPEModel::keep_cached_word(std::string_view word, const TokenSpan* tokens,
                                std::size_t count) const {
  return !word_cache_.full() &&
         word_cache_.keep(word, hash_bytes(word), tokens, count,
                          spans_are_token_lengths(tokens, count));
}

std::vector<uint32_t> BPEModel::merge_ids(const std::vector<uint32_t>& ids) const {
  std::vector<Symbol> syms;
  syms.reserve(ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) {
    syms.push_back({ids[i], static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1)});
  }
  apply_merges(syms);
  std::vector<uint32_t> out;
  out.reserve(syms.size());
  for (const Symbol& s : syms) out.push_back(s.id);
  return out;
}

}  // namespace tokenmill
