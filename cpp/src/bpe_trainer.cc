#include "tokenmill/bpe_trainer.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <thread>
#include <unordered_map>
#include <utility>

#include "tokenmill/error.h"
#include "tokenmill/flat_map.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();
// A character's weight in the alphabet: count x occurrences summed over all words, which can
// pass 2^64 even when every pair count fits (a one-character word has no pairs).
using Weight = WideCount;
// A merge touching at least this many words is split between two threads (below it, starting
// a thread costs more than it saves).
constexpr std::size_t kParallelWords = 4096;

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}
uint32_t left_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
uint32_t right_of(uint64_t key) { return static_cast<uint32_t>(key & 0xFFFFFFFFu); }

// Where a pair occurs: word index in corpus order, then character offset of its left symbol.
// Character offsets (not symbol indexes) stay valid while other parts of the word merge.
uint64_t place(uint32_t word, uint32_t pos) { return (static_cast<uint64_t>(word) << 32) | pos; }

// A character's bytes packed into one integer (at most 4 bytes), a cheap key for the alphabet.
uint64_t pack(std::string_view s, std::size_t i, std::size_t len) {
  uint64_t v = 0;
  for (std::size_t k = 0; k < len; ++k) v = (v << 8) | static_cast<unsigned char>(s[i + k]);
  return v | static_cast<uint64_t>(len) << 32;  // the length tells "\0" from "\0\0" apart
}

// Memory: a word is 16 bytes plus 4 per symbol, all symbols in one array; a pair is 8 bytes of
// map slot (at most half full), 16 of count and first place, and its index of words (4 bytes a
// word it was ever seen in).
struct Word {
  uint64_t count;
  uint32_t start;  // symbols are syms_[start, start + len)
  uint32_t len;
};

struct Entry {
  uint64_t count;
  uint64_t first;
  uint32_t pair;  // index into the pair arrays
};

// The pair changes of one merge, gathered before they touch the trainer's tables: a merge
// changes the same few neighbouring pairs in thousands of words (" t"+"he" makes " th"+"e"
// everywhere), and adding up there (a small table that stays in cache) leaves one lookup in
// the large tables per distinct pair instead of one per occurrence. Lexicographic ties only
// (first_seen needs each occurrence's place).
class PairChanges {
 public:
  struct Slot {
    uint64_t key;
    uint64_t added;
    uint64_t removed;
    uint32_t words;  // occurrences of (slot, word) recorded for this slot
  };
  void remove(uint64_t key, uint64_t count) { slot(key).removed += count; }
  void add(uint64_t key, uint32_t word, uint64_t count) {
    const uint32_t k = index(key);
    Slot& s = slots_[k];
    s.added += count;
    ++s.words;
    occurrences_.push_back({k, word});
  }
  const std::vector<Slot>& slots() const { return slots_; }
  // The words each slot was added in, grouped by slot (in the order they were added):
  // words_of(k) = grouped[first(k), first(k + 1)).
  void group(std::vector<uint32_t>& grouped, std::vector<uint32_t>& first) const {
    first.assign(slots_.size() + 1, 0);
    for (std::size_t k = 0; k < slots_.size(); ++k) first[k + 1] = first[k] + slots_[k].words;
    std::vector<uint32_t> at(first.begin(), first.end() - 1);
    grouped.resize(occurrences_.size());
    for (const auto& [k, word] : occurrences_) grouped[at[k]++] = word;
  }
  void clear() {
    for (const std::size_t i : used_) table_[i] = kFree;
    used_.clear();
    slots_.clear();
    occurrences_.clear();
  }

 private:
  static constexpr uint32_t kFree = ~uint32_t{0};
  std::size_t find_position(uint64_t key) const {
    std::size_t i = mix64(key) & (table_.size() - 1);
    while (table_[i] != kFree && slots_[table_[i]].key != key) i = (i + 1) & (table_.size() - 1);
    return i;
  }
  uint32_t index(uint64_t key) {
    if (2 * (slots_.size() + 1) > table_.size()) grow();
    const std::size_t i = find_position(key);
    if (table_[i] == kFree) {
      table_[i] = static_cast<uint32_t>(slots_.size());
      used_.push_back(i);
      slots_.push_back({key, 0, 0, 0});
    }
    return table_[i];
  }
  Slot& slot(uint64_t key) { return slots_[index(key)]; }
  void grow() {
    table_.assign(std::max<std::size_t>(1024, table_.size() * 2), kFree);
    used_.clear();
    for (std::size_t k = 0; k < slots_.size(); ++k) {
      const std::size_t i = find_position(slots_[k].key);
      table_[i] = static_cast<uint32_t>(k);
      used_.push_back(i);
    }
  }
  std::vector<uint32_t> table_;  // position -> slot index, or kFree
  std::vector<std::size_t> used_;  // positions taken (cleared one by one: probe chains break)
  std::vector<Slot> slots_;
  std::vector<std::pair<uint32_t, uint32_t>> occurrences_;  // (slot, word) of each addition
};

class Trainer {
 public:
  explicit Trainer(const BPETrainerOptions& options) : opt_(options) {}

  BPETrainResult run(const std::vector<std::string_view>& words, const std::vector<uint64_t>& counts,
                     const std::function<void(std::size_t, std::size_t)>& progress);

 private:
  uint32_t add_token(const std::string& token, uint32_t chars);
  void build_words(const std::vector<std::string_view>& words, const std::vector<uint64_t>& counts);
  uint32_t pair_index(uint64_t key);
  void add_occurrence(uint32_t pair, uint32_t word, uint64_t count, uint32_t pos);
  void count_pairs();
  // Whether the occurrences of a pair are counted. With max_token_length, as Hugging Face's
  // trainer counts them: a pair of two of the words' own symbols always (so the first merges of
  // two characters are never held back), a pair a merge makes only if the characters its two
  // tokens cover (a prefix or suffix not counted) are fewer than the limit.
  bool countable(uint64_t key) const;
  bool higher(const Entry& a, const Entry& b) const;
  void push(uint32_t pair);
  bool pop(Entry& top);
  // Per-thread working space of merge_word.
  struct Scratch {
    std::vector<uint32_t> old;
    std::vector<uint32_t> old_pos;
    std::vector<uint32_t> new_pos;
    std::vector<uint32_t> occ_old;
    std::vector<uint32_t> occ_new;
    std::vector<uint32_t> changed;
    std::vector<uint32_t> rescan;
  };
  void apply(uint32_t pair, uint32_t result);
  void merge_words(std::size_t begin, std::size_t end, uint64_t key, uint32_t result, Scratch& sc,
                   PairChanges& changes);
  void merge_word(uint32_t w, uint64_t key, uint32_t result, Scratch& sc, PairChanges& changes);
  void apply_changes(PairChanges& changes);
  void char_positions(const uint32_t* syms, uint32_t n, std::vector<uint32_t>& out) const;
  void rescan_first(uint32_t pair);
  bool done() const;

  const BPETrainerOptions& opt_;
  bool first_seen() const { return opt_.tie_break == TieBreak::kFirstSeen; }

  std::vector<std::string> vocab_;
  std::vector<uint32_t> chars_;  // characters of the input each token covers
  uint32_t first_merged_ = 0;    // the first id a merge gives (build_words' tokens are below)
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Word> words_;
  std::vector<uint32_t> syms_;
  PairMap pair_of_key_;  // pair key -> index
  std::vector<uint64_t> pair_key_;
  std::vector<uint64_t> pair_count_;
  std::vector<uint64_t> pair_first_;  // first place (first_seen only)
  std::vector<std::vector<uint32_t>> pair_where_;
  std::vector<Entry> heap_;
  std::vector<uint64_t> stamp_;  // per word: the last round that touched it
  PairChanges changes_;
  PairChanges more_changes_;  // the second thread's, for a merge split between two
  Scratch scratch_[2];
  std::vector<uint32_t> unique_;  // the words of the merge being applied
  std::vector<uint32_t> change_ids_;  // apply_changes: the pair id of each gathered change
  uint64_t round_ = 0;
  std::vector<MergeStep> merges_;
  std::size_t alphabet_size_ = 0;
};

uint32_t Trainer::add_token(const std::string& token, uint32_t chars) {
  auto it = ids_.find(token);
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(vocab_.size());
  vocab_.push_back(token);
  chars_.push_back(chars);
  ids_.emplace(token, id);
  return id;
}

void Trainer::build_words(const std::vector<std::string_view>& words,
                          const std::vector<uint64_t>& counts) {
  // The alphabet: every character, weighted by word count; the initial alphabet always stays.
  // (Flat tables: the characters of every word are looked up here, tens of millions of times.)
  PairMap slot_of;  // packed character -> its place in freq
  std::vector<std::pair<uint64_t, Weight>> freq;  // (packed character, weight)
  auto weigh = [&](uint64_t packed) -> Weight& {
    uint64_t slot = 0;
    if (!slot_of.find(packed, slot)) {
      slot = freq.size();
      slot_of.insert(packed, slot);
      freq.push_back({packed, 0});
    }
    return freq[slot].second;
  };
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string_view word = words[w];
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t len = utf8_char_len(word, i);
      weigh(pack(word, i, len)) += counts[w];
      i += len;
    }
  }
  for (const std::string& c : opt_.initial_alphabet) {
    if (!c.empty() && c.size() <= 4) weigh(pack(c, 0, c.size())) = ~Weight{0};
  }
  auto unpack = [](uint64_t v) {
    const auto len = static_cast<std::size_t>(v >> 32);
    std::string s(len, '\0');
    for (std::size_t k = 0; k < len; ++k) s[len - 1 - k] = static_cast<char>((v >> (8 * k)) & 0xFF);
    return s;
  };
  std::vector<std::pair<std::string, std::pair<Weight, uint64_t>>> kept;
  kept.reserve(freq.size());
  for (const auto& [packed, count] : freq) kept.push_back({unpack(packed), {count, packed}});
  std::sort(kept.begin(), kept.end());  // code point order (UTF-8 byte order)
  if (opt_.limit_alphabet >= 0 && kept.size() > static_cast<std::size_t>(opt_.limit_alphabet)) {
    std::stable_sort(kept.begin(), kept.end(), [](const auto& a, const auto& b) {
      return a.second.first > b.second.first;
    });
    kept.resize(static_cast<std::size_t>(opt_.limit_alphabet));
    std::sort(kept.begin(), kept.end());
  }
  PairMap id_of;  // packed character -> token id
  for (const auto& entry : kept) id_of.insert(entry.second.second, add_token(entry.first, 1));
  auto id_of_char = [&](uint64_t packed) {
    uint64_t id = 0;
    id_of.find(packed, id);
    return static_cast<uint32_t>(id);
  };
  const bool marker = !opt_.end_of_word_marker.empty();
  uint32_t marker_id = 0;
  if (marker) marker_id = add_token(opt_.end_of_word_marker, 0);
  alphabet_size_ = kept.size() + (marker ? 1 : 0);

  // Prefixed or suffixed variants get ids in sorted order after the alphabet, so ids do not
  // depend on the order words arrive in. Kind: 1 prefixed, 2 suffixed, 3 both.
  const std::string& prefix = opt_.continuing_subword_prefix;
  const std::string suffix = marker ? std::string() : opt_.end_of_word_suffix;
  auto kind_of = [&](std::size_t j, std::size_t n) -> uint64_t {
    return (j > 0 && !prefix.empty() ? 1u : 0u) | (j + 1 == n && !suffix.empty() ? 2u : 0u);
  };
  std::unordered_map<uint64_t, uint32_t> variant_id;  // packed << 2 | kind -> token id
  std::vector<uint64_t> chars;
  // Each kept character's place among all of the word's characters, and how many it has: a
  // prefix or suffix goes by the place in the word, as Hugging Face's trainer puts it (a
  // character dropped at the word's start or end leaves the kept ones as they were; by their
  // places among the kept ones, the vocabulary differed, and its encoder lost characters).
  std::vector<std::size_t> places;
  std::size_t word_chars = 0;
  // A word's characters that are in the alphabet, packed (the others are dropped).
  auto alphabet_chars = [&](std::string_view word) {
    chars.clear();
    places.clear();
    std::size_t place = 0;
    for (std::size_t i = 0; i < word.size(); ++place) {
      const std::size_t len = utf8_char_len(word, i);
      const uint64_t p = pack(word, i, len);
      uint64_t id = 0;
      if (id_of.find(p, id)) {
        chars.push_back(p);
        places.push_back(place);
      }
      i += len;
    }
    word_chars = place;
  };
  if (!prefix.empty() || !suffix.empty()) {
    std::vector<std::pair<std::string, uint64_t>> variants;
    for (const std::string_view word : words) {
      alphabet_chars(word);
      for (std::size_t j = 0; j < chars.size(); ++j) {
        const uint64_t kind = kind_of(places[j], word_chars);
        const uint64_t key = chars[j] << 2 | kind;
        if (kind != 0 && variant_id.emplace(key, 0).second) {
          variants.push_back({(kind & 1 ? prefix : "") + unpack(chars[j]) +
                              (kind & 2 ? suffix : ""), key});
        }
      }
    }
    std::sort(variants.begin(), variants.end());
    for (const auto& [text, key] : variants) variant_id[key] = add_token(text, 1);
  }
  words_.reserve(words.size());
  CountBound bound;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string_view word = words[w];
    alphabet_chars(word);
    if (chars.empty()) continue;
    if (syms_.size() + chars.size() + 1 >= std::numeric_limits<uint32_t>::max()) {
      throw Error("too many symbols in the distinct words (over 2^32)");
    }
    const auto start = static_cast<uint32_t>(syms_.size());
    for (std::size_t j = 0; j < chars.size(); ++j) {
      const uint64_t kind = kind_of(places[j], word_chars);
      syms_.push_back(kind == 0 ? id_of_char(chars[j])
                                : variant_id.at(chars[j] << 2 | kind));
    }
    if (marker) syms_.push_back(marker_id);
    words_.push_back({counts[w], start, static_cast<uint32_t>(syms_.size() - start)});
    bound.add(counts[w], words_.back().len - 1);
  }
  bound.check("count x (symbols - 1)");
  if (words_.size() >= std::numeric_limits<uint32_t>::max()) throw Error("too many distinct words");
  stamp_.assign(words_.size(), 0);
  first_merged_ = static_cast<uint32_t>(vocab_.size());
}

bool Trainer::countable(uint64_t key) const {
  if (opt_.max_token_length < 0) return true;
  const uint32_t a = left_of(key);
  const uint32_t b = right_of(key);
  if (a < first_merged_ && b < first_merged_) return true;
  return uint64_t{chars_[a]} + chars_[b] < static_cast<uint64_t>(opt_.max_token_length);
}

uint32_t Trainer::pair_index(uint64_t key) {
  uint64_t index = 0;
  if (pair_of_key_.find(key, index)) return static_cast<uint32_t>(index);
  index = pair_key_.size();
  pair_of_key_.insert(key, index);
  pair_key_.push_back(key);
  pair_count_.push_back(0);
  if (first_seen()) pair_first_.push_back(kNever);
  pair_where_.emplace_back();
  return static_cast<uint32_t>(index);
}

void Trainer::add_occurrence(uint32_t pair, uint32_t word, uint64_t count, uint32_t pos) {
  pair_count_[pair] += count;
  std::vector<uint32_t>& where = pair_where_[pair];
  if (where.empty() || where.back() != word) where.push_back(word);
  if (first_seen()) pair_first_[pair] = std::min(pair_first_[pair], place(word, pos));
}

void Trainer::char_positions(const uint32_t* syms, uint32_t n, std::vector<uint32_t>& out) const {
  out.resize(n);
  uint32_t pos = 0;
  for (uint32_t k = 0; k < n; ++k) {
    out[k] = pos;
    pos += chars_[syms[k]];
  }
}

void Trainer::count_pairs() {
  std::vector<uint32_t> pos;
  for (std::size_t w = 0; w < words_.size(); ++w) {
    const Word& word = words_[w];
    const uint32_t* s = syms_.data() + word.start;
    if (first_seen()) char_positions(s, word.len, pos);
    for (uint32_t k = 0; k + 1 < word.len; ++k) {
      add_occurrence(pair_index(pair_key(s[k], s[k + 1])), static_cast<uint32_t>(w), word.count,
                     first_seen() ? pos[k] : 0);
    }
  }
  heap_.reserve(pair_key_.size());
  for (uint32_t p = 0; p < pair_key_.size(); ++p) {
    heap_.push_back({pair_count_[p], first_seen() ? pair_first_[p] : 0, p});
  }
  std::make_heap(heap_.begin(), heap_.end(),
                 [this](const Entry& a, const Entry& b) { return higher(b, a); });
}

// Whether a should be merged before b.
bool Trainer::higher(const Entry& a, const Entry& b) const {
  if (a.count != b.count) return a.count > b.count;
  if (first_seen()) return a.first < b.first;
  const uint64_t ka = pair_key_[a.pair];
  const uint64_t kb = pair_key_[b.pair];
  const int c = vocab_[left_of(ka)].compare(vocab_[left_of(kb)]);
  if (c != 0) return c < 0;
  return vocab_[right_of(ka)] < vocab_[right_of(kb)];
}

void Trainer::push(uint32_t pair) {
  heap_.push_back({pair_count_[pair], first_seen() ? pair_first_[pair] : 0, pair});
  std::push_heap(heap_.begin(), heap_.end(),
                 [this](const Entry& a, const Entry& b) { return higher(b, a); });
}

bool Trainer::pop(Entry& top) {
  auto lower = [this](const Entry& a, const Entry& b) { return higher(b, a); };
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower);
    const Entry e = heap_.back();
    heap_.pop_back();
    // Entries are never updated in place. A pair whose count rose (or, tie-breaking by first
    // place, changed at all) was pushed again, so an entry below the current count is stale.
    // A count that only fell was not pushed (most changes are falls: the neighbours of each
    // merge), so an entry above the current count is put back with the count it has now.
    const uint64_t current = pair_count_[e.pair];
    if (current == 0 || e.count < current) continue;
    if (first_seen() && pair_first_[e.pair] != e.first) continue;
    if (e.count > current) {
      push(e.pair);
      continue;
    }
    top = e;
    return true;
  }
  return false;
}

void Trainer::rescan_first(uint32_t pair) {
  const uint64_t key = pair_key_[pair];
  uint64_t first = kNever;
  std::vector<uint32_t> still;
  std::vector<uint32_t> pos;
  for (uint32_t w : pair_where_[pair]) {
    if (!still.empty() && still.back() == w) continue;
    const Word& word = words_[w];
    const uint32_t* s = syms_.data() + word.start;
    char_positions(s, word.len, pos);
    for (uint32_t k = 0; k + 1 < word.len; ++k) {
      if (pair_key(s[k], s[k + 1]) == key) {
        first = std::min(first, place(w, pos[k]));
        still.push_back(w);
        break;
      }
    }
  }
  std::sort(still.begin(), still.end());
  still.erase(std::unique(still.begin(), still.end()), still.end());
  pair_where_[pair] = std::move(still);  // compacted: words that lost the pair are gone
  pair_first_[pair] = first;
}

// Merges every occurrence of the pair, word by word (only the words in its index). A word's
// pairs change only next to an occurrence: the pairs around each occurrence are taken away and
// the pairs around each new symbol are added; the rest of the word is not looked at again.
// With lexicographic ties, the words of a large merge are split between two threads, each
// gathering its own changes (words are disjoint; the tables are touched afterwards, in order).
void Trainer::apply(uint32_t pair, uint32_t result) {
  ++round_;
  const uint64_t key = pair_key_[pair];
  std::vector<uint32_t> where = std::move(pair_where_[pair]);
  pair_where_[pair] = {};
  pair_count_[pair] = 0;
  // An index may list a word twice (or list words that lost the pair since): each once.
  constexpr std::size_t kAhead = 16;
  unique_.clear();
  for (std::size_t at = 0; at < where.size(); ++at) {
    if (at + kAhead < where.size()) __builtin_prefetch(&stamp_[where[at + kAhead]]);
    const uint32_t w = where[at];
    if (stamp_[w] == round_) continue;
    stamp_[w] = round_;
    unique_.push_back(w);
  }
  Scratch& sc = scratch_[0];
  sc.changed.clear();
  sc.rescan.clear();
  const bool parallel = !first_seen() && opt_.threads > 1 && unique_.size() >= kParallelWords;
  if (parallel) {
    const std::size_t mid = unique_.size() / 2;
    std::thread helper(
        [&] { merge_words(mid, unique_.size(), key, result, scratch_[1], more_changes_); });
    merge_words(0, mid, key, result, sc, changes_);
    helper.join();
  } else {
    merge_words(0, unique_.size(), key, result, sc, changes_);
  }
  if (!first_seen()) {
    apply_changes(changes_);
    if (parallel) apply_changes(more_changes_);
    return;
  }
  std::vector<uint32_t>& rescan = sc.rescan;
  std::vector<uint32_t>& changed = sc.changed;

  std::sort(rescan.begin(), rescan.end());
  rescan.erase(std::unique(rescan.begin(), rescan.end()), rescan.end());
  for (uint32_t p : rescan) {
    if (pair_count_[p] > 0) rescan_first(p);
  }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (uint32_t p : changed) {
    if (pair_count_[p] == 0) {
      std::vector<uint32_t>().swap(pair_where_[p]);  // the memory goes back now
      if (first_seen()) pair_first_[p] = kNever;
    } else {
      push(p);
    }
  }
}

// merge_word over unique_[begin, end). The words are scattered over memory: each would wait
// for its entry and then its symbols; asking for them some words ahead (entry first, symbols
// once it has come) overlaps those waits.
void Trainer::merge_words(std::size_t begin, std::size_t end, uint64_t key, uint32_t result,
                          Scratch& sc, PairChanges& changes) {
  constexpr std::size_t kAheadEntry = 16;
  constexpr std::size_t kAheadSymbols = 8;
  for (std::size_t at = begin; at < end; ++at) {
    if (at + kAheadEntry < end) __builtin_prefetch(&words_[unique_[at + kAheadEntry]]);
    if (at + kAheadSymbols < end) {
      __builtin_prefetch(syms_.data() + words_[unique_[at + kAheadSymbols]].start);
    }
    merge_word(unique_[at], key, result, sc, changes);
  }
}

// The pair `key` -> result in word w, non-overlapping and leftmost first. Lexicographic ties:
// the pair changes go to `changes`; first-seen ties: straight into the tables (one thread
// only), with the pairs to push again and to rescan in sc.
void Trainer::merge_word(uint32_t w, uint64_t key, uint32_t result, Scratch& sc,
                         PairChanges& changes) {
  const uint32_t a = left_of(key);
  const uint32_t b = right_of(key);
  Word& word = words_[w];
  uint32_t* s = syms_.data() + word.start;
  const uint32_t n = word.len;
  sc.occ_old.clear();
  sc.occ_new.clear();
  for (uint32_t i = 0; i + 1 < n; ++i) {
    if (s[i] == a && s[i + 1] == b) {
      sc.occ_old.push_back(i);
      ++i;  // non-overlapping, leftmost first: "a a a" -> "aa a"
    }
  }
  if (sc.occ_old.empty()) return;
  sc.old.assign(s, s + n);
  if (first_seen()) char_positions(sc.old.data(), n, sc.old_pos);
  // The word rewritten in place (it only shrinks).
  uint32_t out = 0;
  std::size_t next_occ = 0;
  for (uint32_t i = 0; i < n;) {
    if (next_occ < sc.occ_old.size() && sc.occ_old[next_occ] == i) {
      sc.occ_new.push_back(out);
      s[out++] = result;
      i += 2;
      ++next_occ;
    } else {
      s[out++] = sc.old[i++];
    }
  }
  word.len = out;
  if (first_seen()) char_positions(s, out, sc.new_pos);
  const uint64_t count = word.count;
  // Taken away: the pairs just left and right of each occurrence (the pair itself is gone
  // with its index already). Positions are increasing, so a repeat is the previous one.
  uint32_t last = std::numeric_limits<uint32_t>::max();
  for (uint32_t i : sc.occ_old) {
    for (uint32_t k : {i - 1, i + 1}) {
      if (i == 0 && k == i - 1) continue;
      if (k + 1 >= n || k == last) continue;
      last = k;
      const uint64_t gone = pair_key(sc.old[k], sc.old[k + 1]);
      if (gone == key || !countable(gone)) continue;  // (never counted: nothing to take away)
      if (!first_seen()) {
        changes.remove(gone, count);
        continue;
      }
      uint64_t index = 0;
      pair_of_key_.find(gone, index);
      const auto p = static_cast<uint32_t>(index);
      pair_count_[p] -= count;
      sc.changed.push_back(p);  // a first place may move too: the heap needs the new entry
      if (pair_first_[p] == place(w, sc.old_pos[k])) sc.rescan.push_back(p);
    }
  }
  // Added: the pairs on each side of each new symbol.
  last = std::numeric_limits<uint32_t>::max();
  for (uint32_t j : sc.occ_new) {
    for (uint32_t k : {j - 1, j}) {
      if (j == 0 && k == j - 1) continue;
      if (k + 1 >= out || k == last) continue;
      last = k;
      if (!countable(pair_key(s[k], s[k + 1]))) continue;
      if (!first_seen()) {
        changes.add(pair_key(s[k], s[k + 1]), w, count);
        continue;
      }
      const uint32_t p = pair_index(pair_key(s[k], s[k + 1]));
      add_occurrence(p, w, count, sc.new_pos[k]);
      sc.changed.push_back(p);
    }
  }
}

// One merge's gathered changes into the tables: each distinct pair looked up once, its count
// moved by what was added and taken away, the words it was added in appended to its index; a
// pair that gained goes back on the heap, one that is gone gives its memory back.
void Trainer::apply_changes(PairChanges& changes) {
  std::vector<uint32_t> grouped;
  std::vector<uint32_t> first;
  changes.group(grouped, first);
  const auto& slots = changes.slots();
  // Two passes, each asking for the lines of a few slots ahead: the pairs' ids (one probe of
  // the large pair table each), then their counts and indexes.
  constexpr std::size_t kAhead = 8;
  std::vector<uint32_t>& ids = change_ids_;
  ids.resize(slots.size());
  for (std::size_t k = 0; k < slots.size(); ++k) {
    if (k + kAhead < slots.size()) pair_of_key_.prefetch(slots[k + kAhead].key);
    const PairChanges::Slot& c = slots[k];
    if (c.added > 0) {
      ids[k] = pair_index(c.key);
    } else {
      uint64_t index = 0;
      pair_of_key_.find(c.key, index);  // a pair taken away exists
      ids[k] = static_cast<uint32_t>(index);
    }
  }
  for (std::size_t k = 0; k < slots.size(); ++k) {
    if (k + kAhead < slots.size()) {
      __builtin_prefetch(&pair_count_[ids[k + kAhead]]);
      __builtin_prefetch(&pair_where_[ids[k + kAhead]]);
    }
    const PairChanges::Slot& c = slots[k];
    const uint32_t p = ids[k];
    // Modulo 2^64, exact: the result is a true pair count, within the bound build_words checked.
    pair_count_[p] = pair_count_[p] + c.added - c.removed;
    if (c.added > 0) {
      std::vector<uint32_t>& where = pair_where_[p];
      for (uint32_t i = first[k]; i < first[k + 1]; ++i) {
        if (where.empty() || where.back() != grouped[i]) where.push_back(grouped[i]);
      }
    }
    if (pair_count_[p] == 0) {
      std::vector<uint32_t>().swap(pair_where_[p]);  // the memory goes back now
    } else if (c.added > 0) {
      push(p);
    }
  }
  changes.clear();
}

bool Trainer::done() const {
  if (opt_.num_merges >= 0) return merges_.size() >= static_cast<uint64_t>(opt_.num_merges);
  return vocab_.size() >= opt_.vocab_size;
}

BPETrainResult Trainer::run(const std::vector<std::string_view>& words,
                            const std::vector<uint64_t>& counts,
                            const std::function<void(std::size_t, std::size_t)>& progress) {
  if (words.size() != counts.size()) throw Error("words and counts differ in length");
  for (const std::string& s : opt_.special_tokens) add_token(s, static_cast<uint32_t>(utf8_count(s)));
  build_words(words, counts);
  if (opt_.num_merges < 0 && opt_.vocab_size < vocab_.size()) {
    throw Error("vocab_size " + std::to_string(opt_.vocab_size) + " is smaller than the alphabet (" +
                std::to_string(alphabet_size_) + " symbols) plus special tokens (" +
                std::to_string(opt_.special_tokens.size()) + "): at least " +
                std::to_string(vocab_.size()) + " is needed");
  }
  count_pairs();
  const std::size_t target =
      opt_.num_merges >= 0 ? static_cast<std::size_t>(opt_.num_merges)
                           : static_cast<std::size_t>(opt_.vocab_size) - vocab_.size();
  const std::size_t every = std::max<std::size_t>(1, target / 200);
  Entry top{};
  while (!done() && pop(top)) {
    if (top.count < opt_.min_frequency) break;
    const uint64_t key = pair_key_[top.pair];
    const uint32_t a = left_of(key);
    const uint32_t b = right_of(key);
    std::string token = vocab_[a];
    const std::string& right = vocab_[b];
    const std::string& prefix = opt_.continuing_subword_prefix;
    if (!prefix.empty() && right.compare(0, prefix.size(), prefix) == 0) {
      token.append(right, prefix.size(), std::string::npos);
    } else {
      token += right;
    }
    const uint32_t result = add_token(token, chars_[a] + chars_[b]);
    merges_.push_back({a, b, result, top.count});
    apply(top.pair, result);
    if (progress && merges_.size() % every == 0) progress(merges_.size(), vocab_.size());
  }
  if (progress) progress(merges_.size(), vocab_.size());
  BPETrainResult out;
  out.vocab = std::move(vocab_);
  out.merges = std::move(merges_);
  out.alphabet_size = alphabet_size_;
  return out;
}

// Decimal digits of a number over 2^64.
std::string to_string_wide(WideCount x) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(x % 10)));
    x /= 10;
  } while (x != 0);
  return digits;
}

}  // namespace

void CountBound::check(const char* what) const {
  if (total_ <= std::numeric_limits<uint64_t>::max()) return;
  throw Error(std::string("counts too large: the sum of ") + what + " over the words is " +
              to_string_wide(total_) + ", over the limit 2**64-1 = " +
              std::to_string(std::numeric_limits<uint64_t>::max()) +
              ", so a count could wrap; scale the counts down");
}

BPETrainResult train_bpe(const std::vector<std::string_view>& words,
                         const std::vector<uint64_t>& counts,
                         const BPETrainerOptions& options,
                         const std::function<void(std::size_t, std::size_t)>& progress) {
  Trainer trainer(options);
  return trainer.run(words, counts, progress);
}

}  // namespace tokenmill
