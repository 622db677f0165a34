// BPE encoding: a word's characters become symbols, then merges are applied strictly by rank
// (lowest first; on equal rank the leftmost), as the model was trained. Never longest-match.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "tokenmill/flat_map.h"
#include "tokenmill/utf8.h"
#include "tokenmill/word_cache.h"

namespace tokenmill {

struct BPEOptions {
  int64_t unk_id = -1;                    // -1: characters outside the vocabulary are dropped
  std::string continuing_subword_prefix;  // put before every symbol but a word's first
  std::string end_of_word_suffix;         // attached to a word's last symbol
  int64_t end_of_word_marker_id = -1;     // >= 0: a separate symbol appended to every word
  bool byte_fallback = false;             // unknown characters become <0xNN> byte tokens
  bool fuse_unk = false;                  // consecutive unknowns become one unk token
  bool ignore_merges = false;             // a word found whole in the vocabulary is one token
  bool byte_symbols = false;              // tokens are raw bytes; a word starts as its bytes
  std::size_t cache_capacity = 65536;     // words remembered; 0 disables the caches
  // Not empty: a word is cut before each run of this string that follows another character,
  // and the parts merged (and cached) alone. The same tokens when no token of the vocabulary
  // holds another character followed by it (SentencePiece's "▁"; the caller checks that).
  std::string word_mark;
};

// One output token: its id and the characters [start, end) of the word it covers (bytes, with
// byte_symbols).
struct TokenSpan {
  uint32_t id;
  uint32_t start;
  uint32_t end;
};

// Encodes word in parts, cut before each character (at byte i > a part's start) where cut(i)
// holds, each part by encode(part, out); the parts' spans (characters of the part) are moved to
// characters of word.
template <typename Cut, typename Encode>
void encode_in_parts(std::string_view word, Cut cut, Encode encode, std::vector<TokenSpan>& out) {
  std::size_t start = 0;    // the current part's first byte
  uint32_t start_char = 0;  // and character
  uint32_t chars = 0;
  auto flush = [&](std::size_t end) {
    const std::size_t first = out.size();
    encode(word.substr(start, end - start), out);
    for (std::size_t k = first; k < out.size(); ++k) {
      out[k].start += start_char;
      out[k].end += start_char;
    }
  };
  for (std::size_t i = 0; i < word.size(); ++chars) {
    if (i > start && cut(i)) {
      flush(i);
      start = i;
      start_char = chars;
    }
    i += utf8_char_len(word, i);
  }
  flush(word.size());
}

struct PairCacheEntry;   // merge_lookup.h: a per-thread cache of merge lookups
struct PieceCacheSet;    // bpe.cc: a cache of short pieces' tokens, shared by threads
struct PieceCacheEntry;  // bpe.cc: one piece's entry there
struct SpareMoves;       // bpe.cc: entries on their way to the spare entries
struct PieceKey;

// Whether words read from text hold its first bytes in their low bits, so a mask keeps a
// word's first bytes (the piece keys and token heads rely on it; elsewhere bytes are copied).
#if (defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__) || defined(_MSC_VER)
inline constexpr bool kLittleEndian = true;
#else
inline constexpr bool kLittleEndian = false;
#endif

// The mask of a word's first `have` bytes (all of them from 8 on), on a little-endian machine.
inline uint64_t low_bytes(std::size_t have) {
  return have >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * have)) - 1;
}

// The merge table's key of a pair of ids.
inline uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

// splitmix64: the next 64-bit value of the generator whose state is `state`.
inline uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

struct Merge {
  uint32_t left;
  uint32_t right;
  uint32_t result;
};

// GPT-2's byte-level alphabet back to bytes: each character of token stands for one byte.
// False if token holds a character outside the alphabet (an added token such as "<|endoftext|>").
bool decode_byte_alphabet(std::string_view token, std::string& out);

// The code point that spells byte b in that alphabet (b itself if it prints, else U+0100 +
// its place among the bytes that do not).
uint16_t byte_symbol(unsigned char b);

// Merges of a rank-ordered byte vocabulary (tiktoken's files list tokens and ranks, no merges):
// for each token of two or more bytes, the two parts that byte-pair merging by rank, with only
// the lower ranks, leaves of it. Returns (left rank, right rank, token rank) triples in rank
// order; a token that does not end in exactly two parts is reported in `unreachable`.
std::vector<Merge> derive_merges(const std::vector<std::string>& tokens,
                                 const std::vector<uint32_t>& ranks,
                                 std::vector<uint32_t>& unreachable);
// The same with the token -> rank map already built (rank_of holds exactly tokens/ranks).
std::vector<Merge> derive_merges(const StringMap& rank_of, const std::vector<std::string>& tokens,
                                 const std::vector<uint32_t>& ranks,
                                 std::vector<uint32_t>& unreachable);

// token -> id for every pair (the map BPEModel and derive_merges look tokens up in).
StringMap vocab_map(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids);

// True if every merge joins only single symbols or tokens that lower-ranked merges make (so
// applying a merge never enables one of lower rank); bpe_long.cc relies on it.
bool merges_build_up(const std::vector<Merge>& merges);

// Pieces of at least this many bytes are cut by backtracking when the vocabulary allows it
// (every model; 32768 unless changed). Returns the previous value.
std::size_t set_backtrack_bytes(std::size_t bytes);
std::size_t backtrack_threshold();
// The long pieces this thread cuts are kept for the text it encodes (BPEModel::cut_long_piece);
// encode_text makes one of these, on for a text that may hold such a piece, and its end
// forgets them and gives back their memory, so a text costs what its own length and repeats
// cost. (Words handed to a model one at a time, outside a text, share the pieces kept on their
// thread from call to call: at most 4 * (128 KiB + 512 KiB) a thread.)
class LongPieceText {
 public:
  explicit LongPieceText(bool on);
  ~LongPieceText();
  LongPieceText(const LongPieceText&) = delete;
  LongPieceText& operator=(const LongPieceText&) = delete;

 private:
  bool on_;
};
// Words of at least this many symbols are merged by the bucket walk (bpe_long.cc), the
// shorter ones by a scan or a heap (every model; 32768 unless changed, which tests do).
// Returns the previous value.
std::size_t set_bucket_symbols(std::size_t symbols);

// The sets of the piece cache in use (shared by every model of the process): 65,536 of two
// entries, then four times that once pieces have lost their place in full sets often enough.
std::size_t piece_cache_sets();

// How a text's batches of pieces have fared in the piece cache, for the ids path (encode_text
// keeps one a text): after kMissStreak batches in a row whose ASCII pieces of kLeastBytes or
// more nearly all missed (15 in 16 of the pieces of kLeastBytes or more the batch met; a batch
// of fewer than 8 such pieces leaves the count as it is), the next kMissSkip batches merge such
// pieces without looking for them there or keeping them (random text: base64), then a batch
// looks again. (Shorter pieces come back even in random text: 70% of base64's pieces are of
// one or two bytes.)
struct PieceMisses {
  static constexpr std::size_t kLeastBytes = 4;
  static constexpr unsigned kMissStreak = 4;
  static constexpr unsigned kMissSkip = 16;
  unsigned streak = 0;  // batches in a row whose ASCII pieces nearly all missed
  unsigned skip = 0;    // batches still to merge without the cache
  std::size_t skipped = 0;  // batches merged without it, added to the process's count at the end
  PieceMisses() = default;
  PieceMisses(const PieceMisses&) = delete;
  PieceMisses& operator=(const PieceMisses&) = delete;
  ~PieceMisses();
};
// Batches of pieces merged without the piece cache in this process (for tests).
std::size_t piece_cache_skipped_batches();

// Per-thread scratch vectors (symbols, spans, ids) keep at most this many elements' room after a
// piece: threads live on in the encoding pool, and one huge piece must not hold its memory.
constexpr std::size_t kScratchKept = std::size_t{1} << 16;

// Room in v for `more` elements after its own, asked for at once (a long word's vector grown by
// doubling was copied a dozen times into memory new to the process), and at least doubled (v
// may gather many words: an exact reserve for each would copy it whole each time).
template <class T>
void reserve_more(std::vector<T>& v, std::size_t more) {
  if (v.capacity() - v.size() < more) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

class BPEModel {
 public:
  // vocab: (token, id) pairs; merges in rank order (rank = index).
  BPEModel(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids,
           const std::vector<Merge>& merges, BPEOptions options);
  // The same from the vocabulary's map (vocab_map), which the model takes over.
  BPEModel(StringMap vocab, const std::vector<Merge>& merges, BPEOptions options);

  // Appends the tokens of one word (a pre-token) to out. Thread-safe.
  void encode_word(std::string_view word, std::vector<TokenSpan>& out) const;

  // The pieces text[bounds[2k], bounds[2k + 1]) for k < count (bounds[2k] <= bounds[2k + 1] <=
  // text.size(), as the scanner gives them: not checked), in order, as encode_word each,
  // with spans relative to text. Faster than one call a piece: the cache lines of a batch of
  // pieces are asked for before any is used.
  static constexpr std::size_t kPieceBatch = 64;
  // Pieces of up to this many bytes may be kept in the piece cache.
  static constexpr std::size_t kPieceCacheBytes = 32;
  void encode_pieces(std::string_view text, const uint32_t* bounds, std::size_t count,
                     std::vector<TokenSpan>& out) const;
  // The same, the ids only (no spans made for pieces found in the cache).
  // misses: the text's record of its batches (PieceMisses), or null.
  void encode_pieces_ids(std::string_view text, const uint32_t* bounds, std::size_t count,
                         std::vector<uint32_t>& ids, PieceMisses* misses = nullptr) const;
  // The same for pieces that follow one another, as scan_pieces gives them: piece k is
  // text[ends[k - 1], ends[k]), where ends[-1], the first piece's start, must be readable.
  // A piece long enough for backtracking (backtrack_threshold) is cut by it, as
  // encode_long_ids would, when it is too long for the piece cache (kPieceCacheBytes);
  // shorter ones take the cache whatever the threshold (but for ASCII pieces of
  // PieceMisses::kLeastBytes or more in the batches that PieceMisses skips).
  void encode_run_ids(std::string_view text, const std::size_t* ends, std::size_t count,
                      std::vector<uint32_t>& ids, PieceMisses* misses = nullptr) const;

  // BPE-dropout (Provilkov et al., 2020): as encode_word, but at every step each applicable
  // merge is skipped with probability `dropout`, in rank order, and the first one kept is
  // applied; when all are skipped the word is done. `rng` is a splitmix64 state, advanced once
  // per draw (tokenmill.reference.bpe draws in the same order). No caches are used.
  void encode_word_dropout(std::string_view word, double dropout, uint64_t& rng,
                           std::vector<TokenSpan>& out) const;

  // byte_symbols: appends the bytes of each id's token to out, leaving out the ids in `skip`
  // (sorted); stops at an id in `stop` (sorted) or one the model has no token for and returns
  // its position, else ids.size(). Thread-safe.
  std::size_t decode_bytes(const std::vector<uint32_t>& ids, const std::vector<uint32_t>& skip,
                           const std::vector<uint32_t>& stop, std::string& out) const;

  // byte_symbols: a piece of backtrack_threshold() bytes or more, its ids appended straight to
  // ids (no spans: a megabyte piece has hundreds of thousands). False, with nothing appended,
  // when the piece is shorter or the vocabulary does not allow backtracking.
  bool encode_long_ids(std::string_view piece, std::vector<uint32_t>& ids) const;

  // byte_symbols: piece (any length) cut by backtracking alone, its ids appended to ids. False,
  // with nothing appended, when the vocabulary does not allow backtracking or the search
  // gives up (a token the tables name that the text does not hold), where the encoders fall
  // back to merging. Tests hold it to the merges' ids.
  bool encode_backtrack_ids(std::string_view piece, std::vector<uint32_t>& ids) const;

  // Whether pieces from set_backtrack_bytes() on are cut by backtracking: the vocabulary
  // allows it (the first call builds its tables).
  bool backtracks() const { return backtrack() != nullptr; }

  // byte_symbols: the id of each three-digit ASCII piece, "000".."999" indexed by its value,
  // when every one of them is a single token (tiktoken's files, GPT-4o's); else null. Built on
  // first use. The cl100k/o200k patterns cut a run of digits three at a time, so a long run's
  // ids come from this table, with no scanning and no piece lookups.
  const uint32_t* three_digit_ids() const;

  // Applies merges by rank to a sequence of ids (the symbols a caller chose); the teaching path.
  std::vector<uint32_t> merge_ids(const std::vector<uint32_t>& ids) const;

  // The ids taken, over every wrap of the ring, for piece-cache entries of more tokens than
  // an entry holds (past kLongEntryIds, the oldest were written over). For tests.
  uint64_t long_entry_slots_taken() const {
    return long_entry_next_.load(std::memory_order_relaxed);
  }
  static constexpr std::size_t kLongEntryIds = std::size_t{1} << 20;

 private:
  struct Symbol {
    uint32_t id;
    uint32_t start;
    uint32_t end;
  };
  void encode_word_uncached(std::string_view word, std::vector<TokenSpan>& out) const;
  // encode_word cutting at options_.word_mark.
  void encode_marked_word(std::string_view word, std::vector<TokenSpan>& out) const;
  // The same as ids (scratch: room for spans, overwritten; hash: the word's hash_bytes, if
  // known).
  void encode_word_ids(std::string_view word, std::vector<uint32_t>& ids,
                       std::vector<TokenSpan>& scratch, const uint64_t* hash = nullptr) const;
  // Whether word goes through the word cache.
  bool word_cacheable(std::string_view word) const;
  // Whether a word that goes through it (cacheable) is looked for there before the vocabulary.
  bool word_cache_first(bool cacheable) const;
  // Merges word, and keeps its tokens in the word cache if keep_hash (its hash) is given.
  void merge_word(std::string_view word, std::vector<TokenSpan>& out,
                  const uint64_t* keep_hash) const;
  // Whether each token's span is as long as its bytes, so the word cache need not keep spans.
  bool spans_are_token_lengths(const TokenSpan* tokens, std::size_t count) const;
  // The word cache (word_cache_): appends word's tokens (hash: hash_bytes(word)) if kept there.
  bool find_cached_word(std::string_view word, uint64_t hash, std::vector<TokenSpan>& out) const;
  // Appends ids[0, count) as tokens end to end from start, each as long as its bytes (where
  // spans_are_token_lengths held when they were kept).
  void push_end_to_end(const uint32_t* ids, std::size_t count, uint32_t start,
                       std::vector<TokenSpan>& out) const;
  // The same as ids only.
  bool find_cached_ids(std::string_view word, std::vector<uint32_t>& ids) const;
  // Keeps word's tokens unless the cache is full (true if the word is there afterwards; false,
  // without a search, once it is full).
  bool keep_cached_word(std::string_view word, const TokenSpan* tokens, std::size_t count) const;
  bool piece_cached() const;  // whether short pieces go through the piece cache
  // encode_pieces_ids and encode_run_ids, the batch's pieces where Bounds says (bpe.cc).
  template <typename Bounds>
  void encode_ids_of(std::string_view text, const Bounds& bounds, std::size_t count,
                     std::vector<uint32_t>& ids, PieceMisses* misses) const;
  // A piece of up to 32 bytes through the piece cache; its spans start at offset. The two
  // ways it takes when the piece has no tokens in its entry: the entry sends it to the word
  // cache (marked), or there is no entry (missed: merged, and an entry written if it can).
  void encode_short_piece(std::string_view piece, uint32_t offset, const PieceKey& key,
                          PieceCacheSet& set, std::vector<TokenSpan>& out) const;
  void encode_marked_piece(std::string_view piece, uint32_t offset,
                           std::vector<TokenSpan>& out) const;
  void encode_missed_piece(std::string_view piece, uint32_t offset, const PieceKey& key,
                           PieceCacheSet& set, std::vector<TokenSpan>& out) const;
  // The same for the ids path, where the piece is ASCII and ascii_merges_ holds: merged on
  // arrays of ids and token ends (merge_ascii); writes its ids at tok (room for one a byte)
  // and returns how many. word_hash: hash_bytes(piece), for its lookup in the vocabulary.
  std::size_t encode_missed_ascii(std::string_view piece, const PieceKey& key,
                                  PieceCacheSet& set, uint32_t* tok, uint64_t word_hash,
                                  SpareMoves* moves) const;
  // The same without the entry: the tokens only (their ends at `ends`).
  std::size_t ascii_tokens(std::string_view piece, uint32_t* tok, uint32_t* ends,
                           uint64_t word_hash) const;
  // ascii_merges_: merges an ASCII piece of at most 32 bytes as apply_merges does its bytes'
  // symbols; writes its tokens' ids and ends (in the piece); returns how many.
  std::size_t merge_ascii(std::string_view piece, uint32_t* tok, uint32_t* ends) const;
  // Writes the entry of key's piece (count tokens end to end: ids tok, ends `ends`) into set,
  // when the tokens fit in one (or, for an ASCII piece, in the word cache, which the entry
  // then names). An entry it moves out of a full set goes to the spare entries, through
  // moves if given (written when the caller flushes them, their lines asked for now), else
  // at once.
  void keep_piece(std::string_view piece, const PieceKey& key, PieceCacheSet& set,
                  const uint32_t* tok, const uint32_t* ends, std::size_t count,
                  SpareMoves* moves = nullptr) const;
  // Short pieces of more tokens than an entry holds (kPackedTokens, or kPieceTokens): their
  // ids, end to end over the piece, are kept in the ring long_entry_ids_, and the entry holds
  // where. keep_long_entry copies ids[0, count) there and gives their place; false if the
  // array could not be had. long_entry_held: whether a place's ids are not yet written over.
  // read_long_entry writes the ids of an entry's place (meta, the id words) at out and returns
  // how many, 0 if the array no longer holds them (or never did).
  bool keep_long_entry(const uint32_t* ids, std::size_t count, uint64_t& place) const;
  bool long_entry_held(uint64_t place) const;
  unsigned read_long_entry(uint64_t meta, const uint64_t (&ids)[2], uint32_t* out) const;
  void initial_symbols(std::string_view word, std::vector<Symbol>& syms) const;
  // A character that is no token: its <0xNN> tokens (byte fallback), else the unknown token
  // (fused with one before it if asked), else nothing.
  void unknown_char(std::string_view ch, uint32_t ci, std::vector<Symbol>& syms) const;
  void initial_byte_symbols(std::string_view word, std::vector<Symbol>& syms) const;
  void apply_merges(std::vector<Symbol>& syms) const;
  void apply_merges_heap(std::vector<Symbol>& syms, double dropout = 0.0,
                         uint64_t* rng = nullptr) const;
  void apply_merges_buckets(std::vector<Symbol>& syms, PairCacheEntry* cache) const;

  // Long pieces by backtracking (bpe_backtrack.cc): the tables, built on first use; null when
  // the vocabulary does not allow it.
  struct Backtrack;
  const Backtrack* backtrack() const;
  std::shared_ptr<const Backtrack> build_backtrack() const;
  // Appends word's tokens; false (and nothing appended) if no encoding was found, which the
  // tables' checks rule out.
  bool encode_backtrack(const Backtrack& bt, std::string_view word, std::vector<TokenSpan>& out,
                        PairCacheEntry* cache) const;
  // The same as ids, which the search also uses as its stack.
  bool encode_backtrack(const Backtrack& bt, std::string_view word, std::vector<uint32_t>& ids,
                        PairCacheEntry* cache) const;
  // Whether merging the bytes of left and right gives them back, no merge of the pairs met on
  // their boundary firing at a rank below `limit` before (~0: no limit).
  bool compatible(const Backtrack& bt, uint32_t left, uint32_t right, PairCacheEntry* cache,
                  uint64_t limit) const;
  static PairCacheEntry* pair_cache_of_thread();
  mutable std::once_flag backtrack_once_;
  mutable std::shared_ptr<const Backtrack> backtrack_;
  // encode_backtrack through the long pieces this thread has cut in the text it encodes (see
  // LongPieceText): a text of records, or a blob pasted twice into one document,
  // meets a long piece again, and takes its ids from there (a compare and a copy) instead of
  // cutting it again. Used by the encoders; encode_backtrack_ids, which tests hold to the
  // merges, cuts every time.
  bool cut_long_piece(const Backtrack& bt, std::string_view piece, std::vector<uint32_t>& ids,
                      PairCacheEntry* cache) const;
  bool lookup(std::string_view token, uint32_t& id) const;
  // cache: this thread's pair cache (looked up once per word: thread-local access is a call).
  // Defined in cpp/src/merge_lookup.h, which every file that calls it includes (inlined).
  inline bool find_merge(uint32_t left, uint32_t right, uint32_t& rank, uint32_t& result,
                         PairCacheEntry* cache) const;
  // The merge of (left, right) packed as find_merge's (rank << 32 | result), or kNoMerge: the
  // pair filter, then the merge table, without the pair cache (merge_ascii's lookups).
  inline uint64_t merge_of(uint32_t left, uint32_t right) const;
  // False if the pair filter says the pair (pair_key) has no merge.
  inline bool may_merge(uint64_t key) const;

  BPEOptions options_;
  uint64_t serial_;  // distinguishes this model's entries in the per-thread pair cache
  StringMap vocab_;
  PairMap merges_;  // (left << 32 | right) -> (rank << 32 | result)
  // One bit per hash of a merge's pair (256 KiB, so it stays in a core's cache while the merge
  // table of a large vocabulary does not): most pairs of text have no merge (the characters of
  // Chinese rarely merge with their neighbours), and a clear bit answers that without a probe.
  std::vector<uint64_t> pair_filter_;
  std::size_t merge_count_ = 0;
  bool merges_build_up_ = false;  // long pieces may be cut by backtracking
  void check_token_lengths(const std::vector<Merge>& merges);
  bool tokens_are_lengths_ = false;  // byte-level, each merge's token its parts' bytes
  bool packed_ids_ = false;  // and ids below 2^18: piece-cache entries of 8 tokens
  // tokens_are_lengths_, and every ASCII byte a token (not the unknown one): an ASCII piece's
  // symbols are its bytes, and merge_ascii may merge it.
  bool ascii_merges_ = false;
  // ascii_merges_: the merge of every two ASCII bytes (first << 7 | second), as find_merge
  // packs it (rank << 32 | result), or kNoMerge; 128 KiB, where the first lookups of an ASCII
  // piece found a bit in the pair filter, a line in the pair cache and, for the pairs of
  // random text (base64, hex), a line of the merge table, each elsewhere in memory.
  std::vector<uint64_t> ascii_pairs_;
  // ascii_merges_ and ignore_merges: every token of the vocabulary, two bits of 2^20 by its
  // hash_bytes, so an ASCII piece asks the vocabulary only if it may be one (may_be_token).
  std::vector<uint64_t> token_filter_;
  // Whether the piece of that hash_bytes may be a token; only where token_filter_ is built
  // (ascii_merges_ and ignore_merges).
  bool may_be_token(uint64_t word_hash) const;
  bool all_bytes_known(std::string_view ch) const;

  int64_t byte_ids_[256];  // <0xNN> tokens (byte_fallback); -1 where the vocabulary has none
  // Character-level models without a subword prefix or word suffix: each character's token,
  // so initial_symbols neither builds nor hashes a string a character (on Chinese that was a
  // third of a SentencePiece model's time). ASCII by byte; other characters by their UTF-8
  // bytes packed into a key, open addressing; kNoChar where the character is no token.
  static constexpr uint32_t kNoChar = ~uint32_t{0};
  struct CharSlot {
    uint32_t key;
    uint32_t id;  // kNoChar: empty
  };
  bool char_table_ = false;
  uint32_t ascii_char_ids_[128];
  std::vector<CharSlot> char_slots_;
  void build_char_table();
  uint32_t char_id(const char* p, std::size_t len) const;
  bool have_bytes_ = false;
  int64_t symbol_of_byte_[256];  // byte_symbols: each byte's token, -1 if not in the vocab

  // byte_symbols: characters that may start as their own token rather than as their bytes,
  // given the characters beside them (bpe_chars.cc says when that gives the same merges).
  struct CharStart {
    uint32_t token;     // the character's token
    uint32_t contexts;  // its first context (see context_start_): `lefts` left, then `rights`
    uint16_t lefts;
    uint16_t rights;
  };
  void build_char_starts(const std::vector<Merge>& merges);
  bool starts_whole(const CharStart& c, std::string_view prev, std::string_view next) const;
  std::vector<uint32_t> char_start_of_;  // code point below U+10000 -> char_starts_ index
  std::vector<CharStart> char_starts_;
  // The contexts (token bytes that must not be beside a character): context k is
  // context_bytes_[context_start_[k], context_start_[k + 1]).
  std::string context_bytes_;
  std::vector<uint32_t> context_start_;

  // Each id's token (a null view where no token has the id), built when first asked for.
  const std::vector<std::string_view>& tokens_by_id() const;
  mutable std::once_flag decode_once_;
  mutable std::vector<std::string_view> token_of_id_;

  // What decode_bytes reads: every token's bytes end to end, then kDecodePad bytes that are
  // never a token's, and each id's place there (length kNoDecode where no token has the id).
  // Built when first asked for. The padding lets a token of up to kDecodePad bytes be copied
  // as one fixed-size block, its length then added to the output's end. (A second copy of the
  // tokens' bytes beside token_of_id_, which the word cache reads: about 3 MB for o200k_base,
  // in a process that decodes.)
  static constexpr std::size_t kDecodePad = 16;
  static constexpr uint32_t kNoDecode = ~uint32_t{0};
  struct DecodeSpan {
    uint32_t offset;
    uint32_t length;
  };
  struct DecodeTable {
    std::string bytes;
    std::vector<DecodeSpan> spans;
  };
  const DecodeTable& decode_table() const;
  mutable std::once_flag decode_table_once_;
  mutable DecodeTable decode_table_;

  mutable std::once_flag digits_once_;
  mutable std::vector<uint32_t> three_digit_ids_;  // empty: not every one is a single token

  mutable WordCache word_cache_;  // words merged before -> their tokens (word_cache.h)

  // The ids of long entries (keep_long_entry), a ring of kLongEntryIds slots (8 MiB: an id
  // and its lap) allocated at the first, never moved nor freed while the model lives. Readers
  // find a place only in an entry written after its slots (piece_write's release, piece_read's
  // acquire), and take the ids only if every slot is still of the entry's lap.
  // long_entry_next_: the slots taken in all.
  mutable std::once_flag long_entry_once_;
  mutable std::unique_ptr<std::atomic<uint64_t>[]> long_entry_ids_;
  mutable std::atomic<uint64_t> long_entry_next_{0};
  // Entries moved out of the piece cache's full sets (keep_piece: a newer piece of the model
  // took the second way): a table of the model's own (bpe.cc: kSpareEntries entries, one a
  // piece finds by bits of its hash its set does not use), made with the model where it has
  // the piece cache (256 KiB), else null. A lookup that finds a piece's set full of the
  // model's entries and not holding it looks here.
  struct SpareEntriesFree {
    void operator()(PieceCacheEntry* entries) const;
  };
  PieceCacheEntry* spare_entries() const { return spare_entries_.get(); }
  std::unique_ptr<PieceCacheEntry, SpareEntriesFree> spare_entries_;
};

}  // namespace tokenmill
