// Long pieces by backtracking, in time linear in their length and with memory read in order.
//
// The idea is the one of the `bpe` crate of GitHub's rust-gems (its README explains it): the
// tokens that byte-pair merging gives a text are the one way to cut the text into tokens such
// that every two neighbours are "compatible", i.e. merging the bytes of the two alone gives back
// exactly those two. So the text can be cut left to right, taking the longest token that fits
// and is compatible with the one before, trying shorter ones when it is not, and stepping back
// when none is; a position found to lead nowhere is remembered, so each is given up at most once.
//
// That holds when every token, merged from its own bytes, comes out as itself, and when each
// token is made by one merge of two tokens made before it: build_backtrack checks both (on the
// vocabularies of tiktoken and of trained models they hold) and otherwise returns null, and
// long pieces take the bucket walk instead.
//
// The longest token at a position comes from a table of every token's prefixes, keyed by a hash
// that extends byte by byte.
//
// Compatibility of (a, b) replays, backwards, what stood on either side of the boundary while
// a and b were being made: the one made last is split into its parts, and each pair met on the
// way must not have a merge that would have fired before the merge that split it.

#include <algorithm>
#include <array>
#include <cstring>

#include "tokenmill/bpe.h"
#include "merge_lookup.h"

// A lambda's body inlined where it is called (the search's longest match, called from two
// places: left to itself, the compiler stopped inlining it once it had grown).
#if defined(__GNUC__) || defined(__clang__)
#define TOKENMILL_LAMBDA_INLINE __attribute__((always_inline))
#else
#define TOKENMILL_LAMBDA_INLINE
#endif

namespace tokenmill {

namespace {
constexpr uint32_t kNone = ~uint32_t{0};

// The key of a string in the prefix table: FNV-1a over its bytes, so the keys of all of a
// string's prefixes come one byte at a time, then one multiply to spread them (the table takes
// its slot from the top bits). Never 0, the table's empty key.
constexpr uint64_t kPrefixSeed = 0xCBF29CE484222325ULL;
inline uint64_t prefix_step(uint64_t h, unsigned char byte) {
  return (h ^ byte) * 0x100000001B3ULL;
}
inline uint64_t prefix_key(uint64_t h) { return ((h ^ (h >> 31)) * 0x9E3779B97F4A7C15ULL) | 1; }

// Prefix key -> value, open addressing on the key's top bits (the keys are hashes already),
// at most half full. A slot keeps the key's low 32 bits only (eight bytes a slot, eight to a
// line: the table of o200k_base is half the size, and a random text's walks miss the cache
// less). Two keys that agree there on one probe chain are taken for one, which costs speed,
// never ids: two whole tokens so merged stop the build (the vocabulary then keeps the bucket
// walk); a prefix merged with a token can name that token where the text does not hold it,
// which the check against the text catches (the piece is then merged the ordinary way).
class PrefixTable {
 public:
  void reserve(std::size_t n) {
    std::size_t bits = 4;
    while ((std::size_t{1} << bits) < 2 * n + 1) ++bits;
    slots_.assign(std::size_t{1} << bits, Slot{0, 0});
    shift_ = 64 - static_cast<int>(bits);
    mask_ = slots_.size() - 1;
  }
  void prefetch(uint64_t key) const { __builtin_prefetch(&slots_[key >> shift_]); }
  bool find(uint64_t key, uint32_t& value) const {
    const auto tag = static_cast<uint32_t>(key);  // never 0: keys are odd
    for (std::size_t i = key >> shift_;; i = (i + 1) & mask_) {
      if (slots_[i].tag == tag) {
        value = slots_[i].value;
        return true;
      }
      if (slots_[i].tag == 0) return false;
    }
  }
  // The value of key, added as 0 if absent (the table must have room: reserve).
  uint32_t& at(uint64_t key) {
    const auto tag = static_cast<uint32_t>(key);
    std::size_t i = key >> shift_;
    while (slots_[i].tag != tag && slots_[i].tag != 0) i = (i + 1) & mask_;
    slots_[i].tag = tag;
    return slots_[i].value;
  }

 private:
  struct Slot {
    uint32_t tag;  // the key's low 32 bits; 0: empty
    uint32_t value;
  };
  LargeVector<Slot> slots_;
  int shift_ = 64;
  std::size_t mask_ = 0;
};

}  // namespace

struct BPEModel::Backtrack {
  // Every prefix of every token, by prefix_key: token + 1 if the prefix is a token, else 0.
  // Keys are hashes, so a token found here is checked against the text before it is used; a
  // prefix is never missing (each is added from the token that has it).
  PrefixTable prefixes;
  // By token id (kNone / 0 for ids the encoder never gives):
  // All the search reads of a token in one 32-byte record (its bytes, past the first eight,
  // are read through `bytes` only on a match): a random text's walk reads a few fields of
  // each token it meets, and six arrays cost up to six misses a token where this costs one.
  struct Token {
    uint64_t head = 0;  // the token's first eight bytes, zero-padded (as the text's are read)
    uint32_t length = 0;
    uint32_t shorter = kNone;  // the longest token that is a proper prefix of the token
    uint32_t made = 0;         // 1 + the rank of the merge that makes the token; 0: a byte
    uint32_t left = kNone;     // the merge's parts
    uint32_t right = kNone;
    uint32_t unused = 0;
  };
  static_assert(sizeof(Token) == 32, "one token, half a cache line");
  LargeVector<Token> tokens;
  std::vector<const char*> bytes;  // by token id: its bytes (the vocabulary's own copy)
  std::string_view spelling(uint32_t id) const { return {bytes[id], tokens[id].length}; }
  // Whether text at p starts with token t: its first eight bytes against the record's head
  // (the token's own bytes, elsewhere, were one more miss to memory a match), the rest, of
  // the few longer tokens, byte by byte.
  bool spelled_at(std::string_view text, std::size_t p, uint32_t t) const {
    const Token& token = tokens[t];
    if (token.length > text.size() - p) return false;
    const std::size_t head_len = std::min<std::size_t>(token.length, 8);
    uint64_t word = 0;
    if (kLittleEndian && p + 8 <= text.size()) {
      std::memcpy(&word, text.data() + p, 8);
      word &= low_bytes(head_len);
    } else {
      std::memcpy(&word, text.data() + p, head_len);
    }
    if (word != token.head) return false;
    for (std::size_t i = 8; i < token.length; ++i) {
      if (text[p + i] != bytes[t][i]) return false;
    }
    return true;
  }
  // The first two steps of a longest match without the prefix table: each byte's token, and
  // for each two bytes, token + 1 if they are one (else 0), with kLonger if a longer token
  // starts with them.
  static constexpr uint32_t kLonger = uint32_t{1} << 31;
  uint32_t byte_token[256];
  std::vector<uint32_t> two_bytes;
  // The third step, for printable ASCII: each such two bytes that begin a longer token has a
  // row (three_row: row + 1, else 0) of 96 entries, one for each third byte in [0x20, 0x80),
  // coded as two_bytes. Random ASCII (hex, base64, letters) then rarely reaches the prefix
  // table, whose every probe was a miss to memory. At most 96 * 96 rows of 384 bytes.
  static constexpr unsigned kAsciiLow = 0x20;
  static constexpr unsigned kAsciiSpan = 0x60;
  static bool printable(unsigned char c) { return c - kAsciiLow < kAsciiSpan; }
  std::vector<uint16_t> three_row;
  std::vector<uint32_t> three_bytes;
  // A bit per hash of every token prefix of three and four bytes (128 KiB): the prefix table's
  // first probe of a walk is one of those, and in random text it is mostly absent. A clear bit
  // answers that without the probe, which was a miss to memory (the table of o200k_base is
  // 16 MiB); a set bit may be a false one (about one in sixteen), and the table decides.
  static constexpr int kShortBits = 20;
  std::vector<uint64_t> short_prefixes;
  static uint64_t short_bit(uint64_t key) {
    return (key >> 24) & ((uint64_t{1} << kShortBits) - 1);
  }
  bool maybe_short_prefix(uint64_t key) const {
    const uint64_t bit = short_bit(key);
    return ((short_prefixes[static_cast<std::size_t>(bit >> 6)] >> (bit & 63)) & 1) != 0;
  }
};

const BPEModel::Backtrack* BPEModel::backtrack() const {
  std::call_once(backtrack_once_, [this] { backtrack_ = build_backtrack(); });
  return backtrack_.get();
}

std::shared_ptr<const BPEModel::Backtrack> BPEModel::build_backtrack() const {
  if (!options_.byte_symbols || !merges_build_up_) return nullptr;
  auto bt = std::make_shared<Backtrack>();
  uint32_t max_id = 0;
  for (int b = 0; b < 256; ++b) {
    if (symbol_of_byte_[b] < 0) return nullptr;  // a byte the vocabulary cannot spell
    max_id = std::max(max_id, static_cast<uint32_t>(symbol_of_byte_[b]));
  }
  merges_.for_each([&](uint64_t key, uint64_t value) {
    max_id = std::max({max_id, static_cast<uint32_t>(key >> 32),
                       static_cast<uint32_t>(key & 0xFFFFFFFFu),
                       static_cast<uint32_t>(value & 0xFFFFFFFFu)});
  });
  if (max_id >= Backtrack::kLonger - 1) return nullptr;
  const std::size_t ids = std::size_t{max_id} + 1;
  bt->tokens.assign(ids, Backtrack::Token{});
  bt->bytes.assign(ids, nullptr);
  std::vector<char> is_byte(ids, 0);
  std::vector<uint32_t> order;  // bytes, then made tokens by rank
  order.reserve(merge_count_ + 256);
  for (int b = 0; b < 256; ++b) {
    const auto id = static_cast<uint32_t>(symbol_of_byte_[b]);
    if (is_byte[id]) return nullptr;  // two bytes, one token
    is_byte[id] = 1;
    order.push_back(id);
  }
  bool unique = true;
  const std::size_t first_made = order.size();
  merges_.for_each([&](uint64_t key, uint64_t value) {
    const auto result = static_cast<uint32_t>(value & 0xFFFFFFFFu);
    if (bt->tokens[result].made != 0 || is_byte[result]) unique = false;  // made twice, or a byte
    bt->tokens[result].made = static_cast<uint32_t>(value >> 32) + 1;
    bt->tokens[result].left = static_cast<uint32_t>(key >> 32);
    bt->tokens[result].right = static_cast<uint32_t>(key & 0xFFFFFFFFu);
    order.push_back(result);
  });
  if (!unique) return nullptr;
  std::sort(order.begin() + static_cast<std::ptrdiff_t>(first_made), order.end(),
            [&](uint32_t a, uint32_t b) { return bt->tokens[a].made < bt->tokens[b].made; });
  bool one_spelling = true;  // (and no token of 64 KiB or more)
  vocab_.for_each([&](std::string_view token, uint32_t id) {
    // not one the encoder gives
    if (id >= ids || (bt->tokens[id].made == 0 && !is_byte[id])) return;
    Backtrack::Token& info = bt->tokens[id];
    if (bt->bytes[id] != nullptr || token.size() > 0xFFFF) one_spelling = false;
    bt->bytes[id] = token.data();
    info.length = static_cast<uint32_t>(token.size());
    std::memcpy(&info.head, token.data(), std::min<std::size_t>(token.size(), 8));
  });
  if (!one_spelling) return nullptr;
  // Each token, in the order made: it must be spelled as its parts, and merging its own bytes
  // must give it back, i.e. no merge across its parts' boundary fires before its own (its parts
  // came back as themselves, being made before it).
  std::size_t added = 256;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const Backtrack::Token& info = bt->tokens[order[k]];
    const std::string_view bytes = bt->spelling(order[k]);
    if (bytes.data() == nullptr) return nullptr;
    if (k < first_made) {
      if (bytes.size() != 1) return nullptr;
      continue;
    }
    const std::string_view l = bt->spelling(info.left);
    const std::string_view r = bt->spelling(info.right);
    if (l.data() == nullptr || r.data() == nullptr || bytes.size() != l.size() + r.size() ||
        bytes.substr(0, l.size()) != l || bytes.substr(l.size()) != r ||
        !compatible(*bt, info.left, info.right, pair_cache_of_thread(), info.made - 1)) {
      return nullptr;
    }
    added += r.size();
  }
  // The prefix table. A token's prefixes up to its left part's length are the left part's,
  // added before it: only the longer ones are new. The prefixes of three and four bytes also
  // set their bits in the filter.
  bt->prefixes.reserve(added);
  bt->short_prefixes.assign((std::size_t{1} << Backtrack::kShortBits) / 64, 0);
  for (std::size_t k = 0; k < order.size(); ++k) {
    const uint32_t t = order[k];
    const std::string_view bytes = bt->spelling(t);
    const std::size_t from = k < first_made ? 0 : bt->tokens[bt->tokens[t].left].length;
    uint64_t h = kPrefixSeed;
    for (std::size_t i = 0; i < bytes.size(); ++i) {
      h = prefix_step(h, static_cast<unsigned char>(bytes[i]));
      if (i < from) continue;
      if (i == 2 || i == 3) {
        const uint64_t bit = Backtrack::short_bit(prefix_key(h));
        bt->short_prefixes[static_cast<std::size_t>(bit >> 6)] |= uint64_t{1} << (bit & 63);
      }
      if (i + 1 < bytes.size()) {
        bt->prefixes.at(prefix_key(h));
      } else {
        uint32_t& value = bt->prefixes.at(prefix_key(h));
        if (value != 0) return nullptr;  // two tokens with one key: give up on the table
        value = t + 1;
      }
    }
  }
  for (int b = 0; b < 256; ++b) bt->byte_token[b] = static_cast<uint32_t>(symbol_of_byte_[b]);
  bt->two_bytes.assign(std::size_t{1} << 16, 0);
  for (std::size_t k = first_made; k < order.size(); ++k) {
    const std::string_view bytes = bt->spelling(order[k]);
    uint32_t& two = bt->two_bytes[std::size_t{static_cast<unsigned char>(bytes[0])} << 8 |
                                  static_cast<unsigned char>(bytes[1])];
    two |= bytes.size() == 2 ? order[k] + 1 : Backtrack::kLonger;
  }
  auto printable = Backtrack::printable;
  bt->three_row.assign(std::size_t{1} << 16, 0);
  for (std::size_t k = first_made; k < order.size(); ++k) {
    const std::string_view bytes = bt->spelling(order[k]);
    const auto b0 = static_cast<unsigned char>(bytes[0]);
    const auto b1 = static_cast<unsigned char>(bytes[1]);
    if (bytes.size() < 3 || !printable(b0) || !printable(b1)) continue;
    uint16_t& row = bt->three_row[std::size_t{b0} << 8 | b1];
    if (row == 0) {
      bt->three_bytes.resize(bt->three_bytes.size() + Backtrack::kAsciiSpan, 0);
      row = static_cast<uint16_t>(bt->three_bytes.size() / Backtrack::kAsciiSpan);
    }
    const auto b2 = static_cast<unsigned char>(bytes[2]);
    if (!printable(b2)) continue;  // the prefix table answers for this third byte
    uint32_t& three = bt->three_bytes[(row - 1u) * std::size_t{Backtrack::kAsciiSpan} + b2 -
                                      Backtrack::kAsciiLow];
    three |= bytes.size() == 3 ? order[k] + 1 : Backtrack::kLonger;
  }
  // Each made token's longest shorter token: its left part, or a longer prefix that is one.
  for (std::size_t k = first_made; k < order.size(); ++k) {
    const uint32_t t = order[k];
    const std::string_view bytes = bt->spelling(t);
    uint32_t best = bt->tokens[t].left;
    uint64_t h = kPrefixSeed;
    for (std::size_t i = 0; i + 1 < bytes.size(); ++i) {
      h = prefix_step(h, static_cast<unsigned char>(bytes[i]));
      uint32_t value = 0;
      if (i + 1 > bt->tokens[best].length && bt->prefixes.find(prefix_key(h), value) &&
          value != 0 && bt->spelling(value - 1) == bytes.substr(0, i + 1)) {
        best = value - 1;
      }
    }
    bt->tokens[t].shorter = best;
  }
  return bt;
}

bool BPEModel::compatible(const Backtrack& bt, uint32_t a, uint32_t b, PairCacheEntry* cache,
                          uint64_t limit) const {
  // A merge of the pair at the boundary fires if its rank is below `limit`, the rank of the
  // merge that ends the pair (by making one side bigger). Ties go to the leftmost pair.
  // (The tokens' address kept: read from bt at each step, after the pair cache's stores, it
  // was 1% of the instructions on random letters.)
  const Backtrack::Token* const tokens = bt.tokens.data();
  while (true) {
    uint32_t rank = 0;
    uint32_t result = 0;
    if (find_merge(a, b, rank, result, cache) && rank < limit) return false;
    const uint32_t made_a = tokens[a].made;
    const uint32_t made_b = tokens[b].made;
    if (made_a > made_b) {  // a was made last: before, its right part stood beside b
      limit = made_a - 1;   // a's merge, left of the boundary pair, wins a tie
      a = tokens[a].right;
    } else if (made_b > 0) {  // b was made last (or a == b: the right one is made later)
      limit = made_b;         // the boundary pair, left of b's merge, wins a tie
      b = tokens[b].left;
    } else {
      return true;  // two bytes that do not merge
    }
  }
}

bool BPEModel::encode_backtrack(const Backtrack& bt, std::string_view word,
                                std::vector<TokenSpan>& out, PairCacheEntry* cache) const {
  thread_local std::vector<uint32_t> ids;
  ids.clear();
  const bool found = cut_long_piece(bt, word, ids, cache);
  if (found) {
    uint32_t at = 0;
    for (uint32_t id : ids) {
      out.push_back({id, at, at + bt.tokens[id].length});
      at += bt.tokens[id].length;
    }
  }
  if (ids.capacity() > kScratchKept) std::vector<uint32_t>().swap(ids);
  return found;
}

bool BPEModel::encode_backtrack_ids(std::string_view piece, std::vector<uint32_t>& ids) const {
  const Backtrack* bt = options_.byte_symbols ? backtrack() : nullptr;
  return bt != nullptr && encode_backtrack(*bt, piece, ids, pair_cache_of_thread());
}

bool BPEModel::encode_long_ids(std::string_view piece, std::vector<uint32_t>& ids) const {
  if (!options_.byte_symbols || piece.size() < backtrack_threshold()) return false;
  uint32_t whole = 0;
  if (options_.ignore_merges && lookup(piece, whole)) {
    ids.push_back(whole);
    return true;
  }
  const Backtrack* bt = backtrack();
  return bt != nullptr && cut_long_piece(*bt, piece, ids, pair_cache_of_thread());
}

namespace {
// The last kKept long pieces this thread cut in the text it is encoding, each of at most
// kKeptBytes, with their ids (at most one a byte): at most 4 * (128 KiB + 512 KiB) a thread.
struct KeptLongPieces {
  static constexpr std::size_t kKept = 4;
  static constexpr std::size_t kKeptBytes = std::size_t{1} << 17;
  uint64_t model = 0;  // the serial of the model that cut them (0: none kept)
  std::string bytes[kKept];
  std::vector<uint32_t> ids[kKept];
  std::size_t next = 0;  // the way a new one takes (the oldest)
};
[[gnu::noinline]] KeptLongPieces& kept_long_pieces() {
  thread_local KeptLongPieces kept;
  return kept;
}
}  // namespace

LongPieceText::LongPieceText(bool on) : on_(on) {}

LongPieceText::~LongPieceText() {
  if (!on_) return;
  // (what is kept is not for the next text, and its memory goes back)
  KeptLongPieces& kept = kept_long_pieces();
  kept.model = 0;
  for (std::size_t w = 0; w < KeptLongPieces::kKept; ++w) {
    std::string().swap(kept.bytes[w]);
    std::vector<uint32_t>().swap(kept.ids[w]);
  }
}

bool BPEModel::cut_long_piece(const Backtrack& bt, std::string_view piece,
                              std::vector<uint32_t>& ids, PairCacheEntry* cache) const {
  // (No hash: a kept piece of another length is passed over on its size, and one of the same
  // length on its first byte that differs. A long piece is cut at 10 to 50 ns a byte; its
  // compare and copy here cost well under 1% of that.)
  const bool keep = piece.size() <= KeptLongPieces::kKeptBytes;
  KeptLongPieces* kept = nullptr;
  if (keep) {
    kept = &kept_long_pieces();
    if (kept->model != serial_) {  // (another model's pieces, or none)
      for (std::size_t w = 0; w < KeptLongPieces::kKept; ++w) {
        kept->bytes[w].clear();
        kept->ids[w].clear();
      }
      kept->model = serial_;
    }
    for (std::size_t w = 0; w < KeptLongPieces::kKept; ++w) {
      if (kept->bytes[w].size() == piece.size() && !kept->ids[w].empty() &&
          std::memcmp(kept->bytes[w].data(), piece.data(), piece.size()) == 0) {
        ids.insert(ids.end(), kept->ids[w].begin(), kept->ids[w].end());
        return true;
      }
    }
  }
  const std::size_t first = ids.size();
  if (!encode_backtrack(bt, piece, ids, cache)) return false;
  if (keep && ids.size() > first) {
    const std::size_t w = kept->next;
    kept->next = (w + 1) % KeptLongPieces::kKept;
    kept->bytes[w].assign(piece.data(), piece.size());
    kept->ids[w].assign(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
  }
  return true;
}

bool BPEModel::encode_backtrack(const Backtrack& bt, std::string_view word,
                                std::vector<uint32_t>& out, PairCacheEntry* cache) const {
  const std::size_t n = word.size();
  if (n == 0) return true;  // no tokens (and no byte to read)
  // dead[p]: no encoding of the rest goes on from position p (found by stepping back from it).
  std::vector<uint64_t> dead(n / 64 + 1, 0);
  auto is_dead = [&](std::size_t p) { return (dead[p >> 6] >> (p & 63)) & 1; };
  // Text that repeats (one character, a short motif) walks the prefix table from the same
  // bytes again and again: the last walk that stopped within the sixteen bytes from its start
  // keeps its answer under them, and a walk from the same sixteen bytes takes it. (A table of
  // 1024 such answers by hash, tried first, cost random letters 3% more instructions and DNA
  // 7%, where this costs a comparison a walk.)
  uint64_t last_bytes[2] = {0, 0};
  uint32_t last_answer = kNone;  // kNone: none kept
  // The longest token at p (every byte is one, so there always is one); kNone if the table
  // named a token the text does not hold (two strings with one key).
  auto longest = [&](std::size_t p) TOKENMILL_LAMBDA_INLINE {
    const auto b0 = static_cast<unsigned char>(word[p]);
    uint32_t best = bt.byte_token[b0];
    if (p + 1 == n) return best;
    const uint32_t two = bt.two_bytes[std::size_t{b0} << 8 | static_cast<unsigned char>(word[p + 1])];
    if ((two & ~Backtrack::kLonger) != 0) best = (two & ~Backtrack::kLonger) - 1;
    if ((two & Backtrack::kLonger) == 0 || p + 2 == n) return best;
    const auto b1 = static_cast<unsigned char>(word[p + 1]);
    uint64_t h = prefix_step(prefix_step(kPrefixSeed, b0), b1);
    std::size_t from = p + 2;  // the prefix table's walk starts with the prefix ending here
    const auto b2 = static_cast<unsigned char>(word[p + 2]);
    auto printable = Backtrack::printable;
    const uint16_t row =
        printable(b0) && printable(b1) ? bt.three_row[std::size_t{b0} << 8 | b1] : uint16_t{0};
    if (row != 0 && printable(b2)) {
      const uint32_t three = bt.three_bytes[(row - 1u) * std::size_t{Backtrack::kAsciiSpan} + b2 -
                                            Backtrack::kAsciiLow];
      if ((three & ~Backtrack::kLonger) != 0) best = (three & ~Backtrack::kLonger) - 1;
      if ((three & Backtrack::kLonger) == 0) return best;
      h = prefix_step(h, b2);
      from = p + 3;
    }
    // The longer prefixes: the prefix table, unless the last walk's answer holds.
    constexpr std::size_t kKept = 16;
    const bool kept_in = p + kKept <= n;
    uint64_t bytes[2] = {0, 0};
    if (kept_in) {
      std::memcpy(bytes, word.data() + p, kKept);
      if (bytes[0] == last_bytes[0] && bytes[1] == last_bytes[1] && last_answer != kNone) {
        return last_answer;
      }
    }
    // The keys of the next few prefixes do not depend on the lookups, so their lines are
    // asked for together.
    constexpr std::size_t kAhead = 3;
    uint64_t keys[kAhead];
    const std::size_t ahead = std::min(kAhead, n - from);
    for (std::size_t j = 0; j < ahead; ++j) {
      h = prefix_step(h, static_cast<unsigned char>(word[from + j]));
      keys[j] = prefix_key(h);
      // The first is a prefix of three or four bytes: most often none, which the filter says.
      if (j == 0 && !bt.maybe_short_prefix(keys[0])) return best;
      bt.prefixes.prefetch(keys[j]);
    }
    uint32_t found = kNone;
    uint32_t value = 0;
    std::size_t i = from;
    for (; i < n; ++i) {
      uint64_t key = 0;
      if (i - from < ahead) {
        key = keys[i - from];
      } else {
        h = prefix_step(h, static_cast<unsigned char>(word[i]));
        key = prefix_key(h);
      }
      if (!bt.prefixes.find(key, value)) break;
      if (value != 0) found = value - 1;
    }
    if (found != kNone) best = bt.spelled_at(word, p, found) ? found : kNone;
    // The answer depends on text[p, i] alone (the walk stopped at a prefix that is none).
    if (kept_in && i < p + kKept && best != kNone) {
      last_bytes[0] = bytes[0];
      last_bytes[1] = bytes[1];
      last_answer = best;
    }
    return best;
  };
  // Compatibility depends on the two tokens only, and the pairs of a text from a small
  // alphabet (DNA, digits, one character repeated) come back again and again: the answers are
  // kept in a direct-mapped table of 8192 (64 KiB: FASTA-like records ran 21 ms a megabyte
  // with 2048, 19 with these, and random letters, whose pairs rarely repeat, the same). The
  // thread's own, emptied for each piece (not on the stack: threads of some C libraries get
  // 128 KiB of it). An entry is the pair's key (62 bits) shifted up one, and the answer in the
  // low bit; all ones is empty.
  constexpr std::size_t kSeenBits = 13;
  thread_local std::array<uint64_t, std::size_t{1} << kSeenBits> seen_table;
  seen_table.fill(~uint64_t{0});
  uint64_t* const seen = pinned(seen_table.data());  // (the thread-local's address found once)
  auto compatible_seen = [&](uint32_t a, uint32_t b) {
    const uint64_t pair = static_cast<uint64_t>(a) << 31 | b;
    uint64_t& slot = seen[(pair * 0x9E3779B97F4A7C15ULL) >> (64 - kSeenBits)];
    if ((slot >> 1) == pair) return (slot & 1) != 0;
    const bool ok = compatible(bt, a, b, cache, ~uint64_t{0});
    slot = pair << 1 | (ok ? 1 : 0);
    return ok;
  };
  // The tokens so far are the end of `out` itself, used as the stack (no copy at the end).
  const std::size_t base = out.size();
  // Room for a token every two bytes, grown geometrically: out may be a whole text's ids, and
  // reserving just enough for each of many long pieces copied it once a piece.
  reserve_more(out, n / 2 + 1);
  std::size_t pos = 0;
  uint32_t next = longest(0);
  while (pos < n) {
    if (next == kNone) {
      out.resize(base);
      return false;
    }
    uint32_t token = next;
    const bool first = out.size() == base;
    const uint32_t last = first ? kNone : out.back();
    while (true) {
      const std::size_t end = pos + bt.tokens[token].length;
      if (!is_dead(end) && (first || compatible_seen(last, token))) {
        out.push_back(token);
        pos = end;
        if (pos < n) next = longest(pos);
        break;
      }
      if (bt.tokens[token].shorter != kNone) {
        token = bt.tokens[token].shorter;
        continue;
      }
      // Nothing goes on from here after `last`: step back and try it shorter.
      dead[pos >> 6] |= uint64_t{1} << (pos & 63);
      if (first) {  // no encoding at all: the checks above rule it out
        out.resize(base);
        return false;
      }
      out.pop_back();
      pos -= bt.tokens[last].length;
      next = last;
      break;
    }
  }
  return true;
}

}  // namespace tokenmill
