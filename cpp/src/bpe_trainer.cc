#include "tokenmill/bpe_trainer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>
#include <utility>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}
uint32_t left_of(uint64_t key) { return static_cast<uint32_t>(key >> 32); }
uint32_t right_of(uint64_t key) { return static_cast<uint32_t>(key & 0xFFFFFFFFu); }

// Where a pair occurs: word index in corpus order, then character offset of its left symbol.
// Character offsets (not symbol indexes) stay valid while other parts of the word merge.
uint64_t place(uint32_t word, uint32_t pos) { return (static_cast<uint64_t>(word) << 32) | pos; }

struct Word {
  std::vector<uint32_t> syms;
  uint64_t count;
};

struct PairInfo {
  uint64_t count = 0;
  uint64_t first = kNever;     // first occurrence (first-seen tie-break only)
  std::vector<uint32_t> where;  // words it occurs or once occurred in; may repeat
};

struct Entry {
  uint64_t count;
  uint64_t pair;
  uint64_t first;
};

struct Occurrence {
  uint32_t pos;
  uint64_t pair;
};

class Trainer {
 public:
  Trainer(const BPETrainerOptions& options) : opt_(options) {}

  BPETrainResult run(const std::vector<std::string>& words, const std::vector<uint64_t>& counts,
                     const std::function<void(std::size_t, std::size_t)>& progress);

 private:
  uint32_t add_token(const std::string& token, uint32_t chars);
  void build_words(const std::vector<std::string>& words, const std::vector<uint64_t>& counts);
  void occurrences(const std::vector<uint32_t>& syms, std::vector<Occurrence>& out) const;
  void count_pairs();
  bool higher(const Entry& a, const Entry& b) const;
  void push(uint64_t pair);
  bool pop(Entry& top);
  void apply(uint64_t pair, uint32_t result);
  void rescan_first(uint64_t pair);
  bool done() const;

  const BPETrainerOptions& opt_;
  std::vector<std::string> vocab_;
  std::vector<uint32_t> chars_;  // characters of the input each token covers
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<Word> words_;
  std::unordered_map<uint64_t, PairInfo> pairs_;
  std::vector<Entry> heap_;
  std::vector<uint64_t> stamp_;  // per word: the last round that touched it
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

void Trainer::build_words(const std::vector<std::string>& words,
                          const std::vector<uint64_t>& counts) {
  // The alphabet: every character, weighted by word count; the initial alphabet always stays.
  std::map<std::string, uint64_t> freq;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[w];
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t len = utf8_char_len(word, i);
      freq[word.substr(i, len)] += counts[w];
      i += len;
    }
  }
  for (const std::string& c : opt_.initial_alphabet) freq[c] = kNever;
  std::vector<std::pair<std::string, uint64_t>> kept(freq.begin(), freq.end());
  if (opt_.limit_alphabet >= 0 && kept.size() > static_cast<std::size_t>(opt_.limit_alphabet)) {
    std::stable_sort(kept.begin(), kept.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    kept.resize(static_cast<std::size_t>(opt_.limit_alphabet));
    std::sort(kept.begin(), kept.end());  // back to code point order (UTF-8 byte order)
  }
  std::unordered_map<std::string, uint32_t> alphabet;
  for (const auto& entry : kept) alphabet.emplace(entry.first, add_token(entry.first, 1));
  const bool marker = !opt_.end_of_word_marker.empty();
  uint32_t marker_id = 0;
  if (marker) marker_id = add_token(opt_.end_of_word_marker, 0);
  alphabet_size_ = kept.size() + (marker ? 1 : 0);

  // Symbols of each word; prefixed or suffixed variants get ids in sorted order after the
  // alphabet, so ids do not depend on the order words arrive in.
  std::vector<std::vector<std::string>> spelled(words.size());
  std::set<std::string> variants;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& word = words[w];
    std::vector<std::string> chars;
    for (std::size_t i = 0; i < word.size();) {
      const std::size_t len = utf8_char_len(word, i);
      std::string c = word.substr(i, len);
      if (alphabet.count(c)) chars.push_back(std::move(c));
      i += len;
    }
    for (std::size_t j = 0; j < chars.size(); ++j) {
      std::string s;
      if (j > 0) s += opt_.continuing_subword_prefix;
      s += chars[j];
      if (!marker && j + 1 == chars.size()) s += opt_.end_of_word_suffix;
      if (s.size() != chars[j].size()) variants.insert(s);
      chars[j] = std::move(s);
    }
    spelled[w] = std::move(chars);
  }
  for (const std::string& v : variants) add_token(v, 1);
  words_.reserve(words.size());
  for (std::size_t w = 0; w < words.size(); ++w) {
    if (spelled[w].empty()) continue;
    Word word{{}, counts[w]};
    for (const std::string& s : spelled[w]) word.syms.push_back(ids_.at(s));
    if (marker) word.syms.push_back(marker_id);
    words_.push_back(std::move(word));
  }
  if (words_.size() >= std::numeric_limits<uint32_t>::max()) throw Error("too many distinct words");
  stamp_.assign(words_.size(), 0);
}

void Trainer::occurrences(const std::vector<uint32_t>& syms, std::vector<Occurrence>& out) const {
  out.clear();
  uint32_t pos = 0;
  for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
    out.push_back({pos, pair_key(syms[i], syms[i + 1])});
    pos += chars_[syms[i]];
  }
}

void Trainer::count_pairs() {
  std::vector<Occurrence> occ;
  for (std::size_t w = 0; w < words_.size(); ++w) {
    occurrences(words_[w].syms, occ);
    const auto wi = static_cast<uint32_t>(w);
    for (const Occurrence& o : occ) {
      PairInfo& info = pairs_[o.pair];
      info.count += words_[w].count;
      if (info.where.empty() || info.where.back() != wi) info.where.push_back(wi);
      info.first = std::min(info.first, place(wi, o.pos));
    }
  }
  for (const auto& kv : pairs_) heap_.push_back({kv.second.count, kv.first, kv.second.first});
  auto lower = [this](const Entry& a, const Entry& b) { return higher(b, a); };
  std::make_heap(heap_.begin(), heap_.end(), lower);
}

// Whether a should be merged before b.
bool Trainer::higher(const Entry& a, const Entry& b) const {
  if (a.count != b.count) return a.count > b.count;
  if (opt_.tie_break == TieBreak::kFirstSeen) return a.first < b.first;
  const std::string& al = vocab_[left_of(a.pair)];
  const std::string& bl = vocab_[left_of(b.pair)];
  const int c = al.compare(bl);
  if (c != 0) return c < 0;
  return vocab_[right_of(a.pair)] < vocab_[right_of(b.pair)];
}

void Trainer::push(uint64_t pair) {
  const PairInfo& info = pairs_.at(pair);
  heap_.push_back({info.count, pair, info.first});
  std::push_heap(heap_.begin(), heap_.end(),
                 [this](const Entry& a, const Entry& b) { return higher(b, a); });
}

bool Trainer::pop(Entry& top) {
  auto lower = [this](const Entry& a, const Entry& b) { return higher(b, a); };
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), lower);
    const Entry e = heap_.back();
    heap_.pop_back();
    auto it = pairs_.find(e.pair);
    if (it == pairs_.end() || it->second.count != e.count || e.count == 0) continue;
    if (opt_.tie_break == TieBreak::kFirstSeen && it->second.first != e.first) continue;
    top = e;
    return true;
  }
  return false;
}

void Trainer::rescan_first(uint64_t pair) {
  PairInfo& info = pairs_.at(pair);
  info.first = kNever;
  std::vector<uint32_t> still;
  std::vector<Occurrence> occ;
  for (uint32_t w : info.where) {
    if (!still.empty() && std::find(still.end() - 1, still.end(), w) != still.end()) continue;
    occurrences(words_[w].syms, occ);
    bool found = false;
    for (const Occurrence& o : occ) {
      if (o.pair == pair) {
        found = true;
        info.first = std::min(info.first, place(w, o.pos));
        break;
      }
    }
    if (found) still.push_back(w);
  }
  std::sort(still.begin(), still.end());
  still.erase(std::unique(still.begin(), still.end()), still.end());
  info.where = std::move(still);  // compacted: words that no longer hold the pair are gone
}

void Trainer::apply(uint64_t pair, uint32_t result) {
  ++round_;
  const uint32_t a = left_of(pair);
  const uint32_t b = right_of(pair);
  std::vector<uint32_t> where = std::move(pairs_.at(pair).where);
  pairs_.erase(pair);
  std::vector<uint64_t> changed;
  std::vector<uint64_t> rescan;
  std::vector<Occurrence> before;
  std::vector<Occurrence> after;
  std::vector<uint32_t> merged;
  const bool first_seen = opt_.tie_break == TieBreak::kFirstSeen;
  for (uint32_t w : where) {
    if (stamp_[w] == round_) continue;
    stamp_[w] = round_;
    Word& word = words_[w];
    const std::vector<uint32_t>& syms = word.syms;
    merged.clear();
    bool hit = false;
    for (std::size_t i = 0; i < syms.size();) {
      if (i + 1 < syms.size() && syms[i] == a && syms[i + 1] == b) {
        merged.push_back(result);
        i += 2;
        hit = true;
      } else {
        merged.push_back(syms[i]);
        ++i;
      }
    }
    if (!hit) continue;
    occurrences(syms, before);
    occurrences(merged, after);
    // Both lists are sorted by position; an occurrence in both at the same place is unchanged.
    std::size_t i = 0;
    std::size_t j = 0;
    while (i < before.size() || j < after.size()) {
      const bool take_before =
          j == after.size() || (i < before.size() && before[i].pos < after[j].pos);
      const bool take_after =
          i == before.size() || (j < after.size() && after[j].pos < before[i].pos);
      if (!take_before && !take_after && before[i].pair == after[j].pair) {
        ++i;
        ++j;
        continue;
      }
      if (!take_after) {  // removed
        const Occurrence& o = before[i++];
        if (o.pair != pair) {
          PairInfo& info = pairs_.at(o.pair);
          info.count -= word.count;
          changed.push_back(o.pair);
          if (first_seen && info.first == place(w, o.pos)) rescan.push_back(o.pair);
        }
      }
      if (!take_before) {  // added
        const Occurrence& o = after[j++];
        PairInfo& info = pairs_[o.pair];
        info.count += word.count;
        if (info.where.empty() || info.where.back() != w) info.where.push_back(w);
        info.first = std::min(info.first, place(w, o.pos));
        changed.push_back(o.pair);
      }
    }
    word.syms.swap(merged);
  }
  std::sort(rescan.begin(), rescan.end());
  rescan.erase(std::unique(rescan.begin(), rescan.end()), rescan.end());
  for (uint64_t p : rescan) {
    if (pairs_.at(p).count > 0) rescan_first(p);
  }
  std::sort(changed.begin(), changed.end());
  changed.erase(std::unique(changed.begin(), changed.end()), changed.end());
  for (uint64_t p : changed) {
    if (pairs_.at(p).count == 0) {
      pairs_.erase(p);
    } else {
      push(p);
    }
  }
}

bool Trainer::done() const {
  if (opt_.num_merges >= 0) return merges_.size() >= static_cast<uint64_t>(opt_.num_merges);
  return vocab_.size() >= opt_.vocab_size;
}

BPETrainResult Trainer::run(const std::vector<std::string>& words,
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
    const uint32_t a = left_of(top.pair);
    const uint32_t b = right_of(top.pair);
    std::string token = vocab_[a];
    const std::string& right = vocab_[b];
    const std::string& prefix = opt_.continuing_subword_prefix;
    if (!prefix.empty() && right.compare(0, prefix.size(), prefix) == 0) {
      token.append(right, prefix.size(), std::string::npos);
    } else {
      token += right;
    }
    if (opt_.max_token_length >= 0 &&
        utf8_count(token) > static_cast<std::size_t>(opt_.max_token_length)) {
      continue;  // never merged; the entry is gone until the pair's count changes
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

}  // namespace

BPETrainResult train_bpe(const std::vector<std::string>& words, const std::vector<uint64_t>& counts,
                         const BPETrainerOptions& options,
                         const std::function<void(std::size_t, std::size_t)>& progress) {
  Trainer trainer(options);
  return trainer.run(words, counts, progress);
}

}  // namespace tokenmill
