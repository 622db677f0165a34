// The loops of Unigram training: seed pieces from a suffix array, the E-step's expectations, the
// pruning losses, the M-step. The schedule (how many rounds, how much to prune) is in Python.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <thread>
#include <unordered_map>

#include "tokenmill/error.h"
#include "tokenmill/unigram.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

constexpr uint32_t kBoundary = 0x110000;  // above every code point: ends each word
constexpr uint32_t kWordStart = 0x2581;   // "▁": a piece may only start with it
// The script class of combining marks (trainers/unigram.py, MARK_CLASS): they join any script.
constexpr int64_t kMarkClass = 2;

uint32_t decode_at(std::string_view s, std::size_t i, std::size_t len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0x7F >> len);
  for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return cp;
}

// Suffix array of text by prefix doubling with radix sorts: O(n log n).
std::vector<uint32_t> suffix_array(const std::vector<uint32_t>& text) {
  const std::size_t n = text.size();
  std::vector<uint32_t> sa(n), rank(n), tmp(n);
  {
    std::vector<uint32_t> values(text);
    std::sort(values.begin(), values.end());
    values.erase(std::unique(values.begin(), values.end()), values.end());
    for (std::size_t i = 0; i < n; ++i) {
      rank[i] = static_cast<uint32_t>(std::lower_bound(values.begin(), values.end(), text[i]) -
                                      values.begin());
    }
  }
  std::iota(sa.begin(), sa.end(), 0u);
  std::stable_sort(sa.begin(), sa.end(), [&](uint32_t a, uint32_t b) { return rank[a] < rank[b]; });
  std::vector<uint32_t> count;
  std::vector<uint32_t> by_second(n);
  for (std::size_t k = 1;; k <<= 1) {
    const std::size_t classes = *std::max_element(rank.begin(), rank.end()) + 2;
    // Order by the second key (the rank at i + k; suffixes without one first), then stably by
    // the first with a counting sort.
    std::size_t at = 0;
    for (std::size_t i = n - std::min(n, k); i < n; ++i) by_second[at++] = static_cast<uint32_t>(i);
    for (std::size_t j = 0; j < n; ++j) {
      if (sa[j] >= k) by_second[at++] = static_cast<uint32_t>(sa[j] - k);
    }
    count.assign(classes, 0);
    for (std::size_t i = 0; i < n; ++i) ++count[rank[i] + 1];
    for (std::size_t c = 1; c < classes; ++c) count[c] += count[c - 1];
    for (std::size_t j = 0; j < n; ++j) sa[count[rank[by_second[j]]]++] = by_second[j];
    tmp[sa[0]] = 0;
    for (std::size_t j = 1; j < n; ++j) {
      const uint32_t a = sa[j - 1];
      const uint32_t b = sa[j];
      const int64_t ra = a + k < n ? rank[a + k] : -1;
      const int64_t rb = b + k < n ? rank[b + k] : -1;
      tmp[b] = tmp[a] + ((rank[a] != rank[b] || ra != rb) ? 1u : 0u);
    }
    rank.swap(tmp);
    if (rank[sa[n - 1]] == n - 1 || k >= n) break;
  }
  return sa;
}

// Runs body(begin, end, slot) over [0, n) on up to `threads` threads.
template <typename Body>
void parallel(std::size_t n, std::size_t threads, Body body) {
  threads = std::max<std::size_t>(1, std::min(threads, n / 64 + 1));
  if (threads == 1) {
    body(0, n, 0);
    return;
  }
  std::vector<std::thread> pool;
  const std::size_t chunk = (n + threads - 1) / threads;
  for (std::size_t t = 0; t < threads; ++t) {
    const std::size_t lo = std::min(n, t * chunk);
    const std::size_t hi = std::min(n, lo + chunk);
    pool.emplace_back([=, &body] { body(lo, hi, t); });
  }
  for (auto& th : pool) th.join();
}

// Runs body(begin, end, part) over kParts fixed parts of [0, n) (part: which one), on up to
// `threads` threads. The parts depend on n alone, so sums kept a part each and added in part
// order come out the same whatever the thread count (kept a thread each, they differed in their
// last bits between one thread and two, and the trained file with them).
constexpr std::size_t kParts = 8;
template <typename Body>
void parallel_parts(std::size_t n, std::size_t threads, Body body) {
  const std::size_t size = (n + kParts - 1) / kParts;
  auto run = [&](std::size_t part) {
    const std::size_t lo = std::min(n, part * size);
    const std::size_t hi = std::min(n, lo + size);
    if (lo < hi) body(lo, hi, part);
  };
  threads = std::max<std::size_t>(1, std::min({threads, kParts, n / 64 + 1}));
  if (threads == 1) {
    for (std::size_t part = 0; part < kParts; ++part) run(part);
    return;
  }
  std::vector<std::thread> pool;
  for (std::size_t t = 0; t < threads; ++t) {
    pool.emplace_back([&run, t, threads] {
      for (std::size_t part = t; part < kParts; part += threads) run(part);
    });
  }
  for (auto& th : pool) th.join();
}

std::string encode_utf8(const std::vector<uint32_t>& text, std::size_t at, std::size_t len) {
  std::string out;
  for (std::size_t k = at; k < at + len; ++k) {
    const uint32_t c = text[k];
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if (c < 0x800) {
      out += static_cast<char>(0xC0 | (c >> 6));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else if (c < 0x10000) {
      out += static_cast<char>(0xE0 | (c >> 12));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (c >> 18));
      out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (c & 0x3F));
    }
  }
  return out;
}

}  // namespace

void seed_pieces(const std::vector<std::string>& words, const std::vector<uint64_t>& counts,
                 std::size_t max_chars, std::size_t seed_size,
                 const std::unordered_map<uint32_t, uint32_t>& scripts,
                 std::vector<std::string>& pieces, std::vector<double>& freqs) {
  if (words.size() != counts.size()) throw Error("words and counts differ in length");
  std::vector<uint32_t> text;
  std::vector<double> weight;  // the count of the word each position belongs to
  std::unordered_map<uint32_t, double> char_freq;
  for (std::size_t w = 0; w < words.size(); ++w) {
    const std::string& s = words[w];
    const auto c = static_cast<double>(counts[w]);
    for (std::size_t i = 0; i < s.size();) {
      const std::size_t len = utf8_char_len(s, i);
      const uint32_t cp = decode_at(s, i, len);
      text.push_back(cp);
      weight.push_back(c);
      char_freq[cp] += c;
      i += len;
    }
    text.push_back(kBoundary);
    weight.push_back(0.0);
  }
  // Characters first, most frequent first (ties by code point, for determinism).
  std::vector<std::pair<double, uint32_t>> chars;
  for (const auto& [cp, f] : char_freq) chars.emplace_back(f, cp);
  std::sort(chars.begin(), chars.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  pieces.clear();
  freqs.clear();
  for (const auto& [f, cp] : chars) {
    pieces.push_back(encode_utf8({cp}, 0, 1));
    freqs.push_back(f);
  }
  const std::size_t n = text.size();
  if (n == 0) return;
  const std::vector<uint32_t> sa = suffix_array(text);
  // Kasai: lcp[j] = common prefix of the suffixes at sa[j - 1] and sa[j].
  std::vector<uint32_t> inverse(n), lcp(n, 0);
  for (std::size_t j = 0; j < n; ++j) inverse[sa[j]] = static_cast<uint32_t>(j);
  std::size_t h = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (inverse[i] == 0) {
      h = 0;
      continue;
    }
    const std::size_t prev = sa[inverse[i] - 1];
    while (i + h < n && prev + h < n && text[i + h] == text[prev + h] && text[i + h] != kBoundary) ++h;
    lcp[inverse[i]] = static_cast<uint32_t>(h);
    if (h > 0) --h;
  }
  std::vector<double> mass(n + 1, 0.0);  // prefix sums of the weights in suffix-array order
  for (std::size_t j = 0; j < n; ++j) mass[j + 1] = mass[j] + weight[sa[j]];
  // Each lcp interval is a substring that repeats (an internal node of the suffix tree); its
  // weighted count is the mass of its suffixes.
  struct Candidate {
    double score;
    uint32_t at;
    uint32_t len;
  };
  auto script = [&](uint32_t cp) -> int64_t {
    const auto it = scripts.find(cp);
    return it == scripts.end() ? -1 - static_cast<int64_t>(cp) : static_cast<int64_t>(it->second);
  };
  std::vector<Candidate> found;
  std::vector<std::pair<uint32_t, std::size_t>> stack{{0, 0}};
  auto report = [&](uint32_t len, std::size_t lb, std::size_t rb) {
    if (len < 2 || len > max_chars) return;
    const uint32_t at = sa[lb];
    const uint32_t first = text[at] == kWordStart ? 1 : 0;
    // One script a piece (after its word-start mark); a combining mark joins any (the script of
    // the piece is its first letter's).
    int64_t piece_script = kMarkClass;
    for (uint32_t k = first; k < len; ++k) {
      if (text[at + k] == kWordStart) return;
      const int64_t s = script(text[at + k]);
      if (s == kMarkClass) continue;
      if (piece_script == kMarkClass) {
        piece_script = s;
      } else if (s != piece_script) {
        return;
      }
    }
    const double f = mass[rb + 1] - mass[lb];
    found.push_back({f * len, at, len});
  };
  for (std::size_t j = 1; j <= n; ++j) {
    const uint32_t l = j < n ? lcp[j] : 0;
    std::size_t lb = j - 1;
    while (l < stack.back().first) {
      const auto [len, left] = stack.back();
      stack.pop_back();
      report(len, left, j - 1);
      lb = left;
    }
    if (l > stack.back().first) stack.emplace_back(l, lb);
  }
  std::sort(found.begin(), found.end(), [&](const Candidate& a, const Candidate& b) {
    if (a.score != b.score) return a.score > b.score;
    return std::lexicographical_compare(text.begin() + a.at, text.begin() + a.at + a.len,
                                        text.begin() + b.at, text.begin() + b.at + b.len);
  });
  for (const Candidate& c : found) {
    if (pieces.size() >= seed_size + chars.size()) break;
    pieces.push_back(encode_utf8(text, c.at, c.len));
    // As sentencepiece, a substring's initial weight is its count times its length: the
    // characters it covers, which starts EM off favouring the longer pieces.
    freqs.push_back(c.score);
  }
}

double e_step(const UnigramModel& model, const std::vector<std::string>& words,
              const std::vector<uint64_t>& counts, std::size_t threads,
              std::vector<double>& expected) {
  std::vector<std::vector<double>> partial(kParts, std::vector<double>(model.size(), 0.0));
  std::vector<double> log_z(kParts, 0.0);
  parallel_parts(words.size(), threads, [&](std::size_t lo, std::size_t hi, std::size_t part) {
    for (std::size_t w = lo; w < hi; ++w) {
      const auto c = static_cast<double>(counts[w]);
      log_z[part] += c * model.expected_counts(words[w], c, partial[part]);
    }
  });
  expected.assign(model.size(), 0.0);
  double total = 0.0;
  for (std::size_t part = 0; part < kParts; ++part) {
    for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += partial[part][i];
    total += log_z[part];
  }
  return total;
}

std::vector<double> prune_losses(const UnigramModel& model, const std::vector<std::string>& words,
                                 const std::vector<uint64_t>& counts, std::size_t threads) {
  const std::size_t size = model.size();
  const std::size_t workers = std::max<std::size_t>(1, threads);
  // How often each piece is used by the corpus' Viterbi segmentations.
  std::vector<std::vector<double>> partial(kParts, std::vector<double>(size, 0.0));
  parallel_parts(words.size(), threads, [&](std::size_t lo, std::size_t hi, std::size_t part) {
    std::vector<uint32_t> ids;
    for (std::size_t w = lo; w < hi; ++w) {
      model.viterbi_ids(words[w], -1, ids);
      for (uint32_t id : ids) partial[part][id] += static_cast<double>(counts[w]);
    }
  });
  std::vector<double> freq(size, 0.0);
  for (const auto& p : partial) {
    for (std::size_t i = 0; i < size; ++i) freq[i] += p[i];
  }
  // Each piece's best segmentation without itself: where its count would go if removed.
  std::vector<std::vector<uint32_t>> alternatives(size);
  std::vector<uint8_t> keep(size, 0);
  parallel(size, workers, [&](std::size_t lo, std::size_t hi, std::size_t) {
    for (std::size_t i = lo; i < hi; ++i) {
      const std::string& p = model.piece(static_cast<uint32_t>(i));
      if (p.empty() || utf8_count(p) == 1 ||
          !model.viterbi_ids(p, static_cast<int64_t>(i), alternatives[i]) ||
          alternatives[i].size() < 2) {
        keep[i] = 1;
      }
    }
  });
  const double sum = std::accumulate(freq.begin(), freq.end(), 0.0);
  double vsum = 0.0;
  for (uint64_t c : counts) vsum += static_cast<double>(c);
  const double logsum = std::log(sum);
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> loss(size, 0.0);
  for (std::size_t i = 0; i < size; ++i) {
    if (keep[i]) {
      loss[i] = inf;
      continue;
    }
    if (freq[i] == 0.0) {
      loss[i] = -inf;
      continue;
    }
    // Removing piece i moves its freq[i] uses onto each of its alternatives: the corpus grows
    // by freq[i] * (alternatives - 1) tokens and each alternative gains freq[i] uses.
    const double share = freq[i] / vsum;
    const double logprob = std::log(freq[i]) - logsum;
    const double logsum_alt =
        std::log(sum + freq[i] * static_cast<double>(alternatives[i].size() - 1));
    double logprob_alt = 0.0;
    for (uint32_t a : alternatives[i]) logprob_alt += std::log(freq[a] + freq[i]) - logsum_alt;
    loss[i] = share * (logprob - logprob_alt);
  }
  return loss;
}

std::vector<double> m_step(const std::vector<double>& expected, const std::vector<uint8_t>& keep,
                           double threshold) {
  std::vector<double> scores(expected.size(), std::numeric_limits<double>::quiet_NaN());
  double total = 0.0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] >= threshold || keep[i]) total += std::max(expected[i], threshold);
  }
  const double log_total = digamma(total);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] >= threshold || keep[i]) {
      scores[i] = digamma(std::max(expected[i], threshold)) - log_total;
    }
  }
  return scores;
}

double digamma(double x) {
  // Shift up with psi(x) = psi(x + 1) - 1/x, then the asymptotic series, accurate to ~1e-12
  // once x >= 7.
  double result = 0.0;
  while (x < 7.0) {
    result -= 1.0 / x;
    x += 1.0;
  }
  const double inv = 1.0 / x;
  const double inv2 = inv * inv;
  result += std::log(x) - 0.5 * inv -
            inv2 * (1.0 / 12 - inv2 * (1.0 / 120 - inv2 * (1.0 / 252 - inv2 * (1.0 / 240 - inv2 / 132))));
  return result;
}

}  // namespace tokenmill
