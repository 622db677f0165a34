#include "tokenmill/bpe.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <queue>
#include <utility>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

constexpr uint32_t kNoRank = std::numeric_limits<uint32_t>::max();
// Below this many symbols a rescan of all pairs per merge beats a heap: words are short.
constexpr std::size_t kHeapThreshold = 48;
// Longer words are not cached: they are rare and would crowd out the frequent short ones.
constexpr std::size_t kMaxCachedWordBytes = 256;

uint64_t pair_key(uint32_t left, uint32_t right) {
  return (static_cast<uint64_t>(left) << 32) | right;
}

}  // namespace

BPEModel::BPEModel(const std::vector<std::string>& tokens, const std::vector<uint32_t>& ids,
                   const std::vector<Merge>& merges, BPEOptions options)
    : options_(std::move(options)) {
  if (tokens.size() != ids.size()) throw Error("vocab tokens and ids differ in length");
  vocab_.reserve(tokens.size());
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    storage_.push_back(tokens[i]);
    vocab_.emplace(std::string_view(storage_.back()), ids[i]);
  }
  merges_.reserve(merges.size());
  for (std::size_t rank = 0; rank < merges.size(); ++rank) {
    const Merge& m = merges[rank];
    // The first rank given for a pair wins, as a later duplicate could never fire.
    merges_.emplace(pair_key(m.left, m.right),
                    (static_cast<uint64_t>(rank) << 32) | static_cast<uint64_t>(m.result));
  }
  have_bytes_ = options_.byte_fallback;
  if (options_.byte_fallback) {
    char name[8];
    for (int b = 0; b < 256; ++b) {
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      uint32_t id = 0;
      if (lookup(name, id)) {
        byte_ids_[b] = id;
      } else {
        have_bytes_ = false;
        byte_ids_[b] = 0;
      }
    }
  }
}

bool BPEModel::lookup(std::string_view token, uint32_t& id) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return false;
  id = it->second;
  return true;
}

bool BPEModel::find_merge(uint32_t left, uint32_t right, uint32_t& rank, uint32_t& result) const {
  auto it = merges_.find(pair_key(left, right));
  if (it == merges_.end()) return false;
  rank = static_cast<uint32_t>(it->second >> 32);
  result = static_cast<uint32_t>(it->second & 0xFFFFFFFFu);
  return true;
}

void BPEModel::initial_symbols(std::string_view word, std::vector<Symbol>& syms) const {
  const std::size_t n_chars = utf8_count(word);
  const bool marker = options_.end_of_word_marker_id >= 0;
  std::string buf;
  uint32_t ci = 0;
  for (std::size_t i = 0; i < word.size(); ++ci) {
    const std::size_t len = utf8_char_len(word, i);
    const std::string_view ch = word.substr(i, len);
    buf.clear();
    if (ci > 0) buf += options_.continuing_subword_prefix;
    buf += ch;
    if (!marker && ci + 1 == n_chars) buf += options_.end_of_word_suffix;
    uint32_t id = 0;
    if (lookup(buf, id)) {
      syms.push_back({id, ci, ci + 1});
    } else if (have_bytes_) {
      // subtle: each byte token spans the whole character it came from, so offsets still
      // slice whole characters of the input.
      for (std::size_t k = 0; k < len; ++k) {
        syms.push_back({byte_ids_[static_cast<unsigned char>(ch[k])], ci, ci + 1});
      }
    } else if (options_.unk_id >= 0) {
      const auto unk = static_cast<uint32_t>(options_.unk_id);
      if (options_.fuse_unk && !syms.empty() && syms.back().id == unk && syms.back().end == ci) {
        syms.back().end = ci + 1;
      } else {
        syms.push_back({unk, ci, ci + 1});
      }
    }
    i += len;
  }
  if (marker && !word.empty()) {
    const auto end = static_cast<uint32_t>(n_chars);
    syms.push_back({static_cast<uint32_t>(options_.end_of_word_marker_id), end, end});
  }
}

void BPEModel::apply_merges(std::vector<Symbol>& syms) const {
  if (syms.size() > kHeapThreshold) {
    apply_merges_heap(syms);
    return;
  }
  while (syms.size() > 1) {
    uint32_t best_rank = kNoRank;
    uint32_t best_result = 0;
    std::size_t best = 0;
    for (std::size_t i = 0; i + 1 < syms.size(); ++i) {
      uint32_t rank = 0;
      uint32_t result = 0;
      // strict < keeps the leftmost pair on equal rank
      if (find_merge(syms[i].id, syms[i + 1].id, rank, result) && rank < best_rank) {
        best_rank = rank;
        best_result = result;
        best = i;
      }
    }
    if (best_rank == kNoRank) break;
    syms[best].id = best_result;
    syms[best].end = syms[best + 1].end;
    syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
  }
}

// O(n log n): a min-heap of candidate merges keyed by (rank, position) over a linked list of
// symbols. Entries go stale when a neighbour merges; they are recognised on pop by checking that
// both symbols are still adjacent and still hold the ids the entry was made for.
void BPEModel::apply_merges_heap(std::vector<Symbol>& syms) const {
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
  auto consider = [&](uint32_t left, uint32_t right) {
    if (left == none || right == none) return;
    uint32_t rank = 0;
    uint32_t result = 0;
    if (find_merge(syms[left].id, syms[right].id, rank, result)) {
      heap.push({rank, left, right, syms[left].id, syms[right].id});
    }
  };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    consider(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1));
  }
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right ||
        syms[c.left].id != c.left_id || syms[c.right].id != c.right_id) {
      continue;
    }
    uint32_t rank = 0;
    uint32_t result = 0;
    find_merge(c.left_id, c.right_id, rank, result);
    syms[c.left].id = result;
    syms[c.left].end = syms[c.right].end;
    alive[c.right] = 0;
    next[c.left] = next[c.right];
    if (next[c.right] != none) prev[next[c.right]] = c.left;
    consider(prev[c.left], c.left);
    consider(c.left, next[c.left]);
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (alive[i]) syms[out++] = syms[i];
  }
  syms.resize(out);
}

void BPEModel::encode_word(std::string_view word, std::vector<TokenSpan>& out) const {
  if (word.empty()) return;
  const bool cacheable = options_.cache_capacity > 0 && word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(std::string(word));
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenSpan> result;
  uint32_t whole = 0;
  if (options_.ignore_merges && lookup(word, whole)) {
    result.push_back({whole, 0, static_cast<uint32_t>(utf8_count(word))});
  } else {
    std::vector<Symbol> syms;
    syms.reserve(word.size() + 1);
    initial_symbols(word, syms);
    apply_merges(syms);
    result.reserve(syms.size());
    for (const Symbol& s : syms) result.push_back({s.id, s.start, s.end});
  }
  out.insert(out.end(), result.begin(), result.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    // A full cache stops growing rather than evicting: frequent words arrive early.
    if (cache_.size() < options_.cache_capacity) cache_.emplace(std::string(word), std::move(result));
  }
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
