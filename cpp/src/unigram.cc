#include "tokenmill/unigram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

// What sentencepiece charges for a character that no piece covers, below the lowest score.
constexpr double kUnkPenalty = 10.0;
// The piece of a trie node that only starts pieces (none ends there).
constexpr uint32_t kPrefixOnly = 0xFFFFFFFFu;

double log_add(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<double>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

// splitmix64: a tiny generator whose sequence is the same on every platform (std::
// distributions are not), so a seed reproduces a sample anywhere.
uint64_t next_random(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double uniform(uint64_t& state) {
  return static_cast<double>(next_random(state) >> 11) * 0x1.0p-53;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

std::vector<double> UnigramModel::forward_mass(const std::vector<Edge>& edges, std::size_t len,
                                               double scale) {
  // Edges come in order of their start, so forward[start] is complete when an edge uses it.
  std::vector<double> forward(len + 1, -std::numeric_limits<double>::infinity());
  forward[0] = 0.0;
  for (const Edge& e : edges) {
    forward[e.end] = log_add(forward[e.end], forward[e.start] + scale * e.score);
  }
  return forward;
}

UnigramModel::UnigramModel(const std::vector<std::string>& pieces, const std::vector<double>& scores,
                           const std::vector<uint8_t>& kinds, UnigramOptions options)
    : pieces_(pieces), scores_(scores), options_(options) {
  if (scores.size() != pieces.size() || kinds.size() != pieces.size()) {
    throw Error("pieces, scores and kinds must have the same length");
  }
  if (options.unk_id >= static_cast<int64_t>(pieces.size())) throw Error("unk_id out of range");
  for (auto& b : byte_ids_) b = -1;
  // sentencepiece takes the extremes over NORMAL pieces only. A user-defined piece scores
  // (its length in bytes) * (the best normal score) - 0.1, so it beats any split of itself.
  double min_score = FLT_MAX;
  double max_score = -FLT_MAX;
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (kinds[i] == kNormal) {
      min_score = std::min(min_score, scores[i]);
      max_score = std::max(max_score, scores[i]);
    }
  }
  if (min_score == FLT_MAX) min_score = max_score = 0.0;
  unk_score_ = min_score - kUnkPenalty;
  if (options.float32_sums) unk_score_ = static_cast<float>(unk_score_);
  std::vector<std::pair<std::string_view, uint32_t>> matchable;  // (the trie's keys)
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string& p = pieces[i];
    const auto id = static_cast<uint32_t>(i);
    if (kinds[i] == kNormal || kinds[i] == kUserDefined) {
      if (p.empty() || id == kPrefixOnly) continue;
      matchable.push_back({pieces_[i], id});
      max_chars_ = std::max(max_chars_, utf8_count(p));
      if (kinds[i] == kUserDefined) {
        scores_[i] = static_cast<double>(p.size()) * max_score - 0.1;
        if (options.float32_sums) scores_[i] = static_cast<float>(scores_[i]);
      }
    } else if (kinds[i] == kByte && p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
      const int hi = hex_digit(p[3]);
      const int lo = hex_digit(p[4]);
      if (hi >= 0 && lo >= 0 && byte_ids_[hi * 16 + lo] < 0) byte_ids_[hi * 16 + lo] = id;
    }
  }
  place_units(matchable);
}

// A double array (Aoe 1989): node s's child by byte c is unit units_[s].base ^ c, if that
// unit's check is s. Built from the sorted keys, a node at a time (its children are the
// distinct bytes after its prefix), each node's children at the first base whose units are
// all free (XOR keeps them within one block of 256). About 1.2 units a node, 12 bytes each:
// ALBERT's 68,000 nodes fit a core's L2, where a hash map of the same trie took 4 MB and a
// probe missed it at nearly every byte.
void UnigramModel::place_units(std::vector<std::pair<std::string_view, uint32_t>>& keys) {
  constexpr uint32_t kFree = 0xFFFFFFFFu;
  constexpr uint32_t kRoot = 0xFFFFFFFEu;  // (the root's check: no node's index)
  constexpr uint32_t kEnd = 0xFFFFFFFFu;   // (the free list's end)
  constexpr std::size_t kBlock = 256;
  constexpr std::size_t kTried = 4;  // the blocks searched for a node of several children
  // (the first of duplicate pieces first: it keeps its place, as sentencepiece's map does)
  std::sort(keys.begin(), keys.end());
  // The free units, linked in order, so a one-child node takes the first at once.
  std::vector<uint32_t> next;
  std::vector<uint32_t> prev;
  uint32_t head = kEnd;
  uint32_t tail = kEnd;
  auto grow = [&] {
    const std::size_t from = units_.size();
    if (from + kBlock >= kRoot) throw Error("too many pieces' bytes for the trie");
    units_.resize(from + kBlock, Unit{0, kFree, kPrefixOnly});
    next.resize(from + kBlock);
    prev.resize(from + kBlock);
    for (std::size_t k = from; k < from + kBlock; ++k) {
      const auto u = static_cast<uint32_t>(k);
      prev[u] = tail;
      next[u] = kEnd;
      if (tail == kEnd) {
        head = u;
      } else {
        next[tail] = u;
      }
      tail = u;
    }
  };
  auto take = [&](std::size_t t) {
    const auto u = static_cast<uint32_t>(t);
    (prev[u] == kEnd ? head : next[prev[u]]) = next[u];
    (next[u] == kEnd ? tail : prev[next[u]]) = prev[u];
  };
  units_.clear();
  grow();
  take(0);
  units_[0] = Unit{0, kRoot, kPrefixOnly};
  struct Node {
    std::size_t lo, hi;  // the keys that start with its prefix, keys[lo, hi)
    std::size_t depth;   // the prefix's length
    uint32_t unit;
  };
  std::vector<Node> stack{{0, keys.size(), 0, 0}};
  struct Child {
    uint8_t byte;
    std::size_t lo, hi;
  };
  std::vector<Child> children;
  while (!stack.empty()) {
    const Node node = stack.back();
    stack.pop_back();
    children.clear();
    for (std::size_t k = node.lo; k < node.hi; ++k) {
      if (keys[k].first.size() == node.depth) continue;  // (it ends here: the node's piece)
      const auto byte = static_cast<uint8_t>(keys[k].first[node.depth]);
      if (children.empty() || children.back().byte != byte) children.push_back({byte, k, k});
      children.back().hi = k + 1;
    }
    if (children.empty()) continue;
    // One child takes the first free unit. More look in the last few blocks only: holes
    // left among single children rarely fit a node's many, and trying each was most of a
    // 200,000-piece model's load.
    std::size_t base = 0;
    if (children.size() == 1) {
      if (head == kEnd) grow();
      base = head ^ children.front().byte;
    } else {
      for (bool found = false; !found;) {
        const std::size_t size = units_.size();
        for (std::size_t f = size > kTried * kBlock ? size - kTried * kBlock : 1;
             f < size && !found; ++f) {
          if (units_[f].check != kFree) continue;
          base = f ^ children.front().byte;  // (in f's block: the units are whole blocks)
          found = true;
          for (const Child& c : children) {
            if (units_[base ^ c.byte].check != kFree) {
              found = false;
              break;
            }
          }
        }
        if (!found) grow();  // (a new block holds them all)
      }
    }
    units_[node.unit].base = static_cast<uint32_t>(base);
    for (const Child& c : children) {
      const std::size_t t = base ^ c.byte;
      take(t);
      const bool ends = keys[c.lo].first.size() == node.depth + 1;
      units_[t] = Unit{0, node.unit, ends ? keys[c.lo].second : kPrefixOnly};
      stack.push_back({c.lo, c.hi, node.depth + 1, static_cast<uint32_t>(t)});
    }
  }
}

void UnigramModel::char_starts(std::string_view word, std::vector<uint32_t>& chars) {
  chars.clear();
  chars.reserve(word.size() + 1);
  for (std::size_t i = 0; i < word.size(); i += utf8_char_len(word, i)) {
    chars.push_back(static_cast<uint32_t>(i));
  }
  chars.push_back(static_cast<uint32_t>(word.size()));
}

template <typename Fn>
void UnigramModel::walk(std::string_view word, Fn&& edge) const {
  // Characters are found as the walk meets them (utf8_char_len's, as char_starts), not read
  // from an array of their offsets: a long word's array was four bytes a character of memory
  // new to the process at each call.
  const std::size_t size = word.size();
  std::size_t first_len = 0;  // the bytes of the character at p
  for (std::size_t p = 0, i = 0; p < size; p += first_len, ++i) {
    first_len = utf8_char_len(word, p);
    bool single = false;
    std::size_t end = i;  // characters matched so far
    std::size_t boundary = p + first_len;  // where the character after `end` ends
    uint32_t unit = 0;  // the root
    for (std::size_t b = p; b < size && end - i < max_chars_; ++b) {
      const std::size_t t = units_[unit].base ^ static_cast<unsigned char>(word[b]);
      if (t >= units_.size() || units_[t].check != unit) break;
      unit = static_cast<uint32_t>(t);
      if (b + 1 != boundary) continue;  // (inside a character)
      ++end;
      if (boundary < size) boundary += utf8_char_len(word, boundary);
      const uint32_t id = units_[unit].piece;
      if (id != kPrefixOnly) {
        edge(static_cast<uint32_t>(i), static_cast<uint32_t>(end), id, scores_[id]);
        single = single || end == i + 1;
      }
    }
    if (!single) {
      if (options_.unk_id < 0) {
        throw Error("the character at " + std::to_string(i) + " of '" + std::string(word) +
                    "' is in no piece and the model has no unk");
      }
      edge(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1),
           static_cast<uint32_t>(options_.unk_id), unk_score_);
    }
  }
}

void UnigramModel::lattice(std::string_view word, std::vector<uint32_t>& chars,
                           std::vector<Edge>& edges) const {
  char_starts(word, chars);
  edges.clear();
  walk(word, [&edges](uint32_t start, uint32_t end, uint32_t id, double score) {
    edges.push_back({start, end, id, score});
  });
}

template <typename Sum>
bool UnigramModel::viterbi(std::string_view word, std::vector<TokenSpan>& out) const {
  // best_path over the lattice as walk() gives it, edge by edge in the same order, without
  // keeping the edges (a long text's were most of its memory and time).
  const std::size_t n = utf8_count(word);
  struct Best {  // the best path into a position: its score, and its last edge's start and id
    Sum score;
    uint32_t start;
    uint32_t id;  // kPrefixOnly: no path yet
  };
  thread_local std::vector<Best> best;  // (12 or 16 bytes a character, in one array)
  best.assign(n + 1, Best{Sum{0}, 0, kPrefixOnly});
  walk(word, [&](uint32_t start, uint32_t end, uint32_t id, double score) {
    if (start != 0 && best[start].id == kPrefixOnly) return;
    const Sum candidate = best[start].score + static_cast<Sum>(score);
    if (best[end].id == kPrefixOnly || candidate > best[end].score) {
      best[end] = {candidate, start, id};
    }
  });
  // The path, counted first and then written from its end straight into out: the memory of a
  // megabyte-long word is new to the process at each call (its buffers are given back), and
  // an edge list grown and copied, then copied again into out, was most of it.
  std::size_t count = 0;
  for (std::size_t at = n; at > 0; at = best[at].start) ++count;
  std::size_t k = out.size() + count;
  out.resize(k);
  const uint32_t unk = options_.unk_id >= 0 ? static_cast<uint32_t>(options_.unk_id) : kPrefixOnly;
  bool unknown = false;
  for (std::size_t at = n; at > 0;) {
    const Best& b = best[at];
    out[--k] = TokenSpan{b.id, b.start, static_cast<uint32_t>(at)};
    unknown = unknown || b.id == unk;
    at = b.start;
  }
  if (best.capacity() > kScratchKept) std::vector<Best>().swap(best);
  return unknown;
}

void UnigramModel::finish(std::string_view word, std::size_t first,
                          std::vector<TokenSpan>& out) const {
  if (options_.unk_id < 0) return;
  const auto unk = static_cast<uint32_t>(options_.unk_id);
  // Consecutive unknowns become one token, as in sentencepiece and Hugging Face.
  std::size_t kept = first;
  bool any_unk = false;
  for (std::size_t k = first; k < out.size(); ++k) {
    const bool is_unk = out[k].id == unk;
    if (is_unk && kept > first && out[kept - 1].id == unk) {
      out[kept - 1].end = out[k].end;
      continue;
    }
    any_unk = any_unk || is_unk;
    out[kept++] = out[k];
  }
  out.resize(kept);
  if (!options_.byte_fallback || !any_unk) return;
  std::vector<uint32_t> chars;
  char_starts(word, chars);
  std::vector<TokenSpan> tokens(out.begin() + static_cast<std::ptrdiff_t>(first), out.end());
  out.resize(first);
  for (const TokenSpan& t : tokens) {
    bool all = t.id == unk;
    for (uint32_t b = chars[t.start]; all && b < chars[t.end]; ++b) {
      all = byte_ids_[static_cast<unsigned char>(word[b])] >= 0;
    }
    if (!all) {
      out.push_back(t);
      continue;
    }
    // Each byte token keeps the span of the character it comes from.
    for (uint32_t c = t.start; c < t.end; ++c) {
      for (uint32_t b = chars[c]; b < chars[c + 1]; ++b) {
        const auto id = static_cast<uint32_t>(byte_ids_[static_cast<unsigned char>(word[b])]);
        out.push_back({id, c, c + 1});
      }
    }
  }
}

void UnigramModel::finish(std::string_view word, const std::vector<Edge>& path,
                          std::vector<TokenSpan>& out) const {
  const std::size_t first = out.size();
  reserve_more(out, path.size());
  for (const Edge& e : path) out.push_back({e.id, e.start, e.end});
  finish(word, first, out);
}

template <typename Sum>
bool UnigramModel::best_path(const std::vector<Edge>& edges, std::size_t n, int64_t exclude,
                             std::vector<Edge>& path) const {
  // Forward relaxation, edge by edge in lattice order, replacing only on a strictly better
  // score: sentencepiece's and Hugging Face's order, so exact ties fall the same way.
  std::vector<Sum> best(n + 1, Sum{0});
  std::vector<int64_t> back(n + 1, -1);
  for (std::size_t k = 0; k < edges.size(); ++k) {
    const Edge& e = edges[k];
    if (static_cast<int64_t>(e.id) == exclude) continue;
    if (e.start != 0 && back[e.start] < 0) continue;
    const Sum candidate = best[e.start] + static_cast<Sum>(e.score);
    if (back[e.end] < 0 || candidate > best[e.end]) {
      best[e.end] = candidate;
      back[e.end] = static_cast<int64_t>(k);
    }
  }
  path.clear();
  if (n > 0 && back[n] < 0) return false;
  for (std::size_t at = n; at > 0;) {
    const Edge& e = edges[static_cast<std::size_t>(back[at])];
    path.push_back(e);
    at = e.start;
  }
  std::reverse(path.begin(), path.end());
  return true;
}

void UnigramModel::encode_word(std::string_view word, std::vector<TokenSpan>& out) const {
  if (word.empty()) return;
  const std::size_t first = out.size();
  const bool unknown = options_.float32_sums ? viterbi<float>(word, out) : viterbi<double>(word, out);
  if (unknown) finish(word, first, out);  // (finish changes only unknowns)
}

bool UnigramModel::viterbi_ids(std::string_view word, int64_t exclude,
                               std::vector<uint32_t>& ids) const {
  ids.clear();
  if (word.empty()) return true;
  std::vector<uint32_t> chars;
  std::vector<Edge> edges;
  lattice(word, chars, edges);
  std::vector<Edge> path;
  if (!best_path<double>(edges, chars.size() - 1, exclude, path)) return false;
  for (const Edge& e : path) ids.push_back(e.id);
  return true;
}

std::vector<Segmentation> UnigramModel::nbest(std::string_view word, std::size_t n) const {
  std::vector<Segmentation> result;
  if (n == 0) return result;
  if (word.empty()) {
    result.push_back({});
    return result;
  }
  std::vector<uint32_t> chars;
  std::vector<Edge> edges;
  lattice(word, chars, edges);
  const std::size_t len = chars.size() - 1;
  // Exact n-best by dynamic programming: each position keeps its n best partial paths. A word
  // is short, so n * (edges) work is cheap, and no A* bookkeeping is needed.
  struct Partial {
    double score;
    int64_t edge;  // the last edge, -1 at the start
    std::size_t rank;  // which partial of the edge's start it extends
  };
  std::vector<std::vector<Partial>> at(len + 1);
  at[0].push_back({0.0, -1, 0});
  std::vector<std::vector<std::size_t>> ending(len + 1);
  for (std::size_t k = 0; k < edges.size(); ++k) ending[edges[k].end].push_back(k);
  for (std::size_t j = 1; j <= len; ++j) {
    std::vector<Partial>& list = at[j];
    for (std::size_t k : ending[j]) {
      const Edge& e = edges[k];
      for (std::size_t r = 0; r < at[e.start].size(); ++r) {
        list.push_back({at[e.start][r].score + e.score, static_cast<int64_t>(k), r});
      }
    }
    std::stable_sort(list.begin(), list.end(),
                     [](const Partial& a, const Partial& b) { return a.score > b.score; });
    if (list.size() > n) list.resize(n);
  }
  for (const Partial& final : at[len]) {
    std::vector<Edge> path;
    Partial p = final;
    while (p.edge >= 0) {
      const Edge& e = edges[static_cast<std::size_t>(p.edge)];
      path.push_back(e);
      p = at[e.start][p.rank];
    }
    std::reverse(path.begin(), path.end());
    Segmentation s;
    s.score = final.score;
    finish(word, path, s.tokens);
    result.push_back(std::move(s));
  }
  return result;
}

void UnigramModel::sample(std::string_view word, double alpha, int64_t nbest_size, uint64_t& rng,
                          std::vector<TokenSpan>& out) const {
  if (word.empty()) return;
  if (nbest_size == 0 || nbest_size == 1) {
    encode_word(word, out);
    return;
  }
  if (nbest_size > 1) {
    std::vector<Segmentation> list = nbest(word, static_cast<std::size_t>(nbest_size));
    std::vector<double> weights;
    double top = -std::numeric_limits<double>::infinity();
    for (const auto& s : list) top = std::max(top, alpha * s.score);
    double total = 0.0;
    for (const auto& s : list) {
      weights.push_back(std::exp(alpha * s.score - top));
      total += weights.back();
    }
    double u = uniform(rng) * total;
    std::size_t pick = 0;
    while (pick + 1 < list.size() && u >= weights[pick]) u -= weights[pick++];
    out.insert(out.end(), list[pick].tokens.begin(), list[pick].tokens.end());
    return;
  }
  std::vector<uint32_t> chars;
  std::vector<Edge> edges;
  lattice(word, chars, edges);
  const std::size_t len = chars.size() - 1;
  const std::vector<double> forward = forward_mass(edges, len, alpha);
  std::vector<std::vector<std::size_t>> ending(len + 1);
  for (std::size_t k = 0; k < edges.size(); ++k) ending[edges[k].end].push_back(k);
  // Backward sampling: at each position pick the edge that ends there with its share of the
  // forward mass, then continue from its start.
  std::vector<Edge> path;
  for (std::size_t j = len; j > 0;) {
    double u = uniform(rng);
    std::size_t chosen = ending[j].back();
    for (std::size_t k : ending[j]) {
      const Edge& e = edges[k];
      const double p = std::exp(forward[e.start] + alpha * e.score - forward[j]);
      if (u < p) {
        chosen = k;
        break;
      }
      u -= p;
    }
    path.push_back(edges[chosen]);
    j = edges[chosen].start;
  }
  std::reverse(path.begin(), path.end());
  finish(word, path, out);
}

double UnigramModel::expected_counts(std::string_view word, double weight,
                                     std::vector<double>& expected) const {
  if (word.empty()) return 0.0;
  std::vector<uint32_t> chars;
  std::vector<Edge> edges;
  lattice(word, chars, edges);
  const std::size_t len = chars.size() - 1;
  const std::vector<double> forward = forward_mass(edges, len, 1.0);
  std::vector<double> backward(len + 1, -std::numeric_limits<double>::infinity());
  backward[len] = 0.0;
  for (std::size_t k = edges.size(); k-- > 0;) {  // edges end in order of their start
    const Edge& e = edges[k];
    backward[e.start] = log_add(backward[e.start], e.score + backward[e.end]);
  }
  const double z = forward[len];
  const auto unk = static_cast<uint32_t>(options_.unk_id);
  for (const Edge& e : edges) {
    if (options_.unk_id >= 0 && e.id == unk) continue;
    expected[e.id] += weight * std::exp(forward[e.start] + e.score + backward[e.end] - z);
  }
  return z;
}

}  // namespace tokenmill
