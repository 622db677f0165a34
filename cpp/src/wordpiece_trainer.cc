#include "tokenmill/wordpiece_trainer.h"

#include <algorithm>
#include <array>
#include <limits>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "tokenmill/bpe_trainer.h"  // CountBound
#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}
uint32_t left_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
uint32_t right_of(uint64_t key) { return static_cast<uint32_t>(key & 0xFFFFFFFFu); }

// Exact products of 64-bit counts in 32-bit limbs (least significant first): scores are
// compared as fractions, p/(a*b) > q/(c*d) <=> p*c*d > q*a*b, so no rounding can reorder pairs
// (the reference twin uses Python's Fraction). Portable: no 128-bit integer type needed.
template <std::size_t N, std::size_t M>
std::array<uint32_t, N + M> multiply(const std::array<uint32_t, N>& a,
                                     const std::array<uint32_t, M>& b) {
  std::array<uint32_t, N + M> out{};
  for (std::size_t i = 0; i < N; ++i) {
    uint64_t carry = 0;
    for (std::size_t j = 0; j < M; ++j) {
      // at most (2^32-1)^2 + 2 * (2^32-1) = 2^64 - 1: never overflows
      const uint64_t cur = uint64_t{out[i + j]} + uint64_t{a[i]} * b[j] + carry;
      out[i + j] = static_cast<uint32_t>(cur);
      carry = cur >> 32;
    }
    out[i + M] = static_cast<uint32_t>(carry);
  }
  return out;
}

std::array<uint32_t, 2> limbs(uint64_t x) {
  return {static_cast<uint32_t>(x), static_cast<uint32_t>(x >> 32)};
}

std::array<uint32_t, 6> product(uint64_t x, uint64_t y, uint64_t z) {
  return multiply(multiply(limbs(x), limbs(y)), limbs(z));
}

// -1, 0, 1 as p/(a*b) is below, equal to or above q/(c*d).
int compare_scores(uint64_t p, uint64_t a, uint64_t b, uint64_t q, uint64_t c, uint64_t d) {
  const auto lhs = product(p, c, d);
  const auto rhs = product(q, a, b);
  for (std::size_t k = lhs.size(); k-- > 0;) {
    if (lhs[k] != rhs[k]) return lhs[k] < rhs[k] ? -1 : 1;
  }
  return 0;
}

// A heap entry: a pair and the counts its score was computed from. `score` is the score in
// floating point, which orders two entries at once unless they are within rounding of each
// other (its relative error is below 2^-50: four roundings); the exact fractions decide then.
struct Entry {
  double score;
  uint64_t pair_count;
  uint64_t left_count;
  uint64_t right_count;
  uint32_t left;
  uint32_t right;
};

struct PairInfo {
  uint64_t count = 0;
  std::vector<uint32_t> words;  // words it was ever seen in (may repeat; checked on use)
  bool indexed = false;         // listed under both its symbols in pairs_of_
};

class Trainer {
 public:
  explicit Trainer(const WordPieceTrainerOptions& opt) : opt_(opt) {}
  WordPieceTrainResult run(const std::vector<std::string>& words,
                           const std::vector<uint64_t>& counts,
                           const std::function<void(std::size_t, std::size_t)>& progress);

 private:
  uint32_t add_token(const std::string& token);
  void build_words(const std::vector<std::string>& words, const std::vector<uint64_t>& counts);
  void push(uint64_t key);
  bool pop_best(Entry& best);
  void merge(const Entry& best, uint32_t result);
  // true if a has priority over b: a higher score, then a higher count, then smaller strings
  bool before(const Entry& a, const Entry& b) const;

  const WordPieceTrainerOptions& opt_;
  std::vector<std::string> vocab_;
  std::unordered_map<std::string, uint32_t> id_of_;
  std::vector<uint64_t> symbol_count_;
  std::vector<std::vector<uint64_t>> pairs_of_;  // symbol -> pairs it is part of
  std::vector<std::vector<uint32_t>> words_;     // each kept word's symbols
  std::vector<uint64_t> word_count_;
  std::unordered_map<uint64_t, PairInfo> pairs_;
  std::vector<Entry> heap_;
  std::size_t alphabet_size_ = 0;
  uint64_t words_dropped_ = 0;
};

uint32_t Trainer::add_token(const std::string& token) {
  const auto it = id_of_.find(token);
  if (it != id_of_.end()) return it->second;
  const auto id = static_cast<uint32_t>(vocab_.size());
  vocab_.push_back(token);
  id_of_.emplace(token, id);
  symbol_count_.push_back(0);
  pairs_of_.emplace_back();
  return id;
}

void Trainer::build_words(const std::vector<std::string>& words,
                          const std::vector<uint64_t>& counts) {
  // The alphabet: characters weighted by word count; the initial alphabet always stays (it
  // takes places within limit_alphabet, as in the BPE trainer). Weights are 128-bit: summed
  // over every word, dropped ones too, they can pass 2^64 where no symbol count does.
  std::unordered_map<std::string, WideCount> freq;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[w];
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t len = utf8_char_len(word, i);
      freq[word.substr(i, len)] += counts[w];
      i += len;
    }
  }
  for (const std::string& c : opt_.initial_alphabet) freq[c] = ~WideCount{0};
  std::vector<std::pair<std::string, WideCount>> kept(freq.begin(), freq.end());
  std::sort(kept.begin(), kept.end());  // code point order (UTF-8 byte order)
  if (opt_.limit_alphabet >= 0 && kept.size() > static_cast<std::size_t>(opt_.limit_alphabet)) {
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    kept.resize(static_cast<std::size_t>(opt_.limit_alphabet));
    std::sort(kept.begin(), kept.end());
  }
  std::unordered_map<std::string, bool> in_alphabet;
  for (const auto& entry : kept) in_alphabet.emplace(entry.first, true);

  // A word with a character outside the alphabet is left out: it encodes as the unknown token
  // whatever is learnt, so its pairs should not vote.
  const std::string& prefix = opt_.continuing_subword_prefix;
  std::vector<std::string> continuing;
  std::unordered_map<std::string, bool> seen_continuing;
  for (const std::string& c : opt_.initial_alphabet) {
    if (seen_continuing.emplace(prefix + c, true).second) continuing.push_back(prefix + c);
  }
  std::vector<std::size_t> kept_words;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[w];
    bool ok = !word.empty();
    for (std::size_t i = 0; ok && i < word.size(); i += utf8_char_len(word, i)) {
      ok = in_alphabet.count(word.substr(i, utf8_char_len(word, i))) > 0;
    }
    if (!ok) {
      words_dropped_ += word.empty() ? 0 : 1;
      continue;
    }
    kept_words.push_back(w);
    for (std::size_t i = utf8_char_len(word, 0); i < word.size(); i += utf8_char_len(word, i)) {
      std::string symbol = prefix + word.substr(i, utf8_char_len(word, i));
      if (seen_continuing.emplace(symbol, true).second) continuing.push_back(std::move(symbol));
    }
  }
  // Ids: the characters' word-initial forms, then their continuing forms, each in code point
  // order, so that ids do not depend on the order the words come in.
  std::sort(continuing.begin(), continuing.end());
  for (const auto& entry : kept) add_token(entry.first);
  for (const std::string& symbol : continuing) add_token(symbol);
  alphabet_size_ = kept.size() + continuing.size();

  words_.reserve(kept_words.size());
  for (const std::size_t w : kept_words) {
    const std::string& word = words[w];
    std::vector<uint32_t> syms;
    for (std::size_t i = 0; i < word.size(); i += utf8_char_len(word, i)) {
      const std::string c = word.substr(i, utf8_char_len(word, i));
      syms.push_back(id_of_.at(i == 0 ? c : prefix + c));
    }
    words_.push_back(std::move(syms));
    word_count_.push_back(counts[w]);
  }
}

bool Trainer::before(const Entry& a, const Entry& b) const {
  constexpr double kClose = 1.0 + 1e-12;
  if (a.score > b.score * kClose) return true;
  if (b.score > a.score * kClose) return false;
  const int c = compare_scores(a.pair_count, a.left_count, a.right_count, b.pair_count,
                               b.left_count, b.right_count);
  if (c != 0) return c > 0;
  if (a.pair_count != b.pair_count) return a.pair_count > b.pair_count;
  const std::string& al = vocab_[a.left];
  const std::string& bl = vocab_[b.left];
  if (al != bl) return al < bl;
  return vocab_[a.right] < vocab_[b.right];
}

void Trainer::push(uint64_t key) {
  const PairInfo& info = pairs_[key];
  if (info.count == 0 || info.count < opt_.min_frequency) return;
  const uint32_t l = left_of(key);
  const uint32_t r = right_of(key);
  const double score = static_cast<double>(info.count) /
                       (static_cast<double>(symbol_count_[l]) * static_cast<double>(symbol_count_[r]));
  heap_.push_back({score, info.count, symbol_count_[l], symbol_count_[r], l, r});
  // std::push_heap keeps the "largest" on top; largest = first in priority
  std::push_heap(heap_.begin(), heap_.end(),
                 [this](const Entry& x, const Entry& y) { return before(y, x); });
}

bool Trainer::pop_best(Entry& best) {
  const auto lower = [this](const Entry& x, const Entry& y) { return before(y, x); };
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower);
    const Entry e = heap_.back();
    heap_.pop_back();
    const auto it = pairs_.find(pair_key(e.left, e.right));
    if (it == pairs_.end() || it->second.count != e.pair_count ||
        symbol_count_[e.left] != e.left_count || symbol_count_[e.right] != e.right_count) {
      continue;  // stale: a fresher entry for this pair was pushed when its counts changed
    }
    best = e;
    return true;
  }
  return false;
}

void Trainer::merge(const Entry& best, uint32_t result) {
  const uint64_t key = pair_key(best.left, best.right);
  std::vector<uint32_t> where = pairs_[key].words;
  std::sort(where.begin(), where.end());
  where.erase(std::unique(where.begin(), where.end()), where.end());
  // Deltas wrap modulo 2^64; the sums they are added to never do, so the results are exact.
  std::unordered_map<uint64_t, uint64_t> pair_delta;
  std::unordered_map<uint32_t, uint64_t> symbol_delta;
  std::vector<uint32_t> merged;
  for (const uint32_t w : where) {
    std::vector<uint32_t>& syms = words_[w];
    const uint64_t f = word_count_[w];
    merged.clear();
    for (std::size_t i = 0; i < syms.size(); ++i) {
      if (i + 1 < syms.size() && syms[i] == best.left && syms[i + 1] == best.right) {
        merged.push_back(result);
        symbol_delta[best.left] -= f;
        symbol_delta[best.right] -= f;
        symbol_delta[result] += f;
        ++i;
      } else {
        merged.push_back(syms[i]);
      }
    }
    if (merged.size() == syms.size()) continue;  // listed, but merged away by an earlier round
    for (std::size_t i = 0; i + 1 < syms.size(); ++i) pair_delta[pair_key(syms[i], syms[i + 1])] -= f;
    for (std::size_t i = 0; i + 1 < merged.size(); ++i) {
      const uint64_t k = pair_key(merged[i], merged[i + 1]);
      pair_delta[k] += f;
      if (merged[i] == result || merged[i + 1] == result) pairs_[k].words.push_back(w);
    }
    syms.swap(merged);
  }
  std::vector<uint64_t> touched;
  for (const auto& [k, d] : pair_delta) {
    if (d == 0) continue;
    PairInfo& info = pairs_[k];
    info.count += d;
    if (info.count > 0 && !info.indexed) {
      info.indexed = true;
      pairs_of_[left_of(k)].push_back(k);
      if (right_of(k) != left_of(k)) pairs_of_[right_of(k)].push_back(k);
    }
    touched.push_back(k);
  }
  for (const auto& [s, d] : symbol_delta) {
    if (d == 0) continue;
    symbol_count_[s] += d;
    // Every score with s in it changed: its pairs that still occur need fresh entries. Pairs
    // that no longer occur leave the list (they are listed again if they come back).
    std::vector<uint64_t>& listed = pairs_of_[s];
    std::size_t kept = 0;
    for (const uint64_t k : listed) {
      PairInfo& info = pairs_[k];
      if (info.count == 0) {
        info.indexed = false;
        continue;
      }
      listed[kept++] = k;
      touched.push_back(k);
    }
    listed.resize(kept);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  pairs_[key].words.clear();
  pairs_[key].words.shrink_to_fit();
  // Stale entries pile up (every pair of a frequent symbol is pushed again each time that
  // symbol's count changes); past twice the pairs there are, the heap is rebuilt from the
  // current counts, which keeps its memory linear in the pairs.
  if (heap_.size() + touched.size() > 2 * pairs_.size() + opt_.heap_slack) {
    heap_.clear();
    touched.clear();
    for (const auto& entry : pairs_) touched.push_back(entry.first);
    std::sort(touched.begin(), touched.end());
  }
  for (const uint64_t k : touched) push(k);
}

WordPieceTrainResult Trainer::run(const std::vector<std::string>& words,
                                  const std::vector<uint64_t>& counts,
                                  const std::function<void(std::size_t, std::size_t)>& progress) {
  for (const std::string& t : opt_.special_tokens) add_token(t);
  const std::size_t specials = vocab_.size();
  build_words(words, counts);
  if (opt_.vocab_size < vocab_.size()) {
    throw Error("vocab_size " + std::to_string(opt_.vocab_size) + " is smaller than the " +
                std::to_string(specials) + " special tokens plus the alphabet (" +
                std::to_string(alphabet_size_) + " symbols: each character, and its " +
                "continuing form); use vocab_size >= " + std::to_string(vocab_.size()) +
                " or a smaller limit_alphabet");
  }
  // Counts never wrap: a symbol count (and so a pair count) is at most the sum of count x
  // symbols, since merging only shortens words; a corpus where that is over 2^64 - 1 is
  // refused. (The deltas of a merge wrap on purpose, see merge.)
  CountBound bound;
  for (std::size_t w = 0; w < words_.size(); ++w) {
    const std::vector<uint32_t>& syms = words_[w];
    const uint64_t f = word_count_[w];
    bound.add(f, syms.size());
    for (std::size_t i = 0; i < syms.size(); ++i) {
      symbol_count_[syms[i]] += f;
      if (i + 1 < syms.size()) {
        PairInfo& info = pairs_[pair_key(syms[i], syms[i + 1])];
        info.count += f;
        if (info.words.empty() || info.words.back() != w) {
          info.words.push_back(static_cast<uint32_t>(w));
        }
      }
    }
  }
  bound.check("count x symbols");
  std::vector<uint64_t> keys;
  keys.reserve(pairs_.size());
  for (auto& [k, info] : pairs_) {
    info.indexed = true;
    pairs_of_[left_of(k)].push_back(k);
    if (right_of(k) != left_of(k)) pairs_of_[right_of(k)].push_back(k);
    keys.push_back(k);
  }
  std::sort(keys.begin(), keys.end());
  for (const uint64_t k : keys) push(k);

  WordPieceTrainResult out;
  const std::string& prefix = opt_.continuing_subword_prefix;
  Entry best{};
  while (vocab_.size() < opt_.vocab_size && pop_best(best)) {
    // the right symbol is never a word's first, so it always starts with the prefix
    const std::string token = vocab_[best.left] + vocab_[best.right].substr(prefix.size());
    const uint32_t result = add_token(token);
    out.merges.push_back({best.left, best.right, result, best.pair_count, best.left_count,
                          best.right_count});
    merge(best, result);
    if (progress && out.merges.size() % 256 == 0) progress(out.merges.size(), vocab_.size());
  }
  if (progress) progress(out.merges.size(), vocab_.size());
  out.vocab = std::move(vocab_);
  out.alphabet_size = alphabet_size_;
  out.words_dropped = words_dropped_;
  return out;
}

}  // namespace

WordPieceTrainResult train_wordpiece(const std::vector<std::string>& words,
                                     const std::vector<uint64_t>& counts,
                                     const WordPieceTrainerOptions& options,
                                     const std::function<void(std::size_t, std::size_t)>& progress) {
  if (words.size() != counts.size()) throw Error("words and counts differ in length");
  if (words.size() >= std::numeric_limits<uint32_t>::max()) throw Error("too many distinct words");
  Trainer trainer(options);
  return trainer.run(words, counts, progress);
}

}  // namespace tokenmill
