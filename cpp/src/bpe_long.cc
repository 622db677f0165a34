// Long pieces (a megabyte of one letter, a blob with no space): merging in linear time; and
// decoding byte-level ids back to bytes.
//
// In a vocabulary whose merges only ever join tokens made by lower-ranked merges (or single
// symbols), as every trained vocabulary and every tiktoken file does (merges_build_up checks),
// applying a merge can only create pairs of higher rank. The ranks still to apply therefore
// only grow: each candidate pair waits in a bucket for its rank, and one walk up the ranks
// applies them, each bucket leftmost first. That is the order the heap gives, without its
// O(log n) memory-scattered steps, which on a million symbols made time grow faster than size.
//
// A SentencePiece BPE model's merges do not all build up: a piece may be made from any two of
// its parts ("▁" + "the" ranks with "▁the", above the merge that makes "the"). A merge there can
// create a pair of its own rank or lower, which the heap would take next; such pairs wait in a
// small heap of their own, emptied after every merge, so the order stays the heap's.

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tokenmill/bpe.h"
#include "tokenmill/error.h"
#include "merge_lookup.h"

namespace tokenmill {

bool merges_build_up(const std::vector<Merge>& merges) {
  uint32_t max_id = 0;
  for (const Merge& m : merges) max_id = std::max({max_id, m.left, m.right, m.result});
  // made_by[id]: 1 + the highest rank of a merge that makes id (0: none does)
  std::vector<uint32_t> made_by(std::size_t{max_id} + 1, 0);
  for (std::size_t r = 0; r < merges.size(); ++r) {
    made_by[merges[r].result] = static_cast<uint32_t>(r + 1);
  }
  for (std::size_t r = 0; r < merges.size(); ++r) {
    if (made_by[merges[r].left] > r || made_by[merges[r].right] > r) return false;
  }
  return true;
}

void BPEModel::apply_merges_buckets(std::vector<Symbol>& syms, PairCacheEntry* cache) const {
  struct Candidate {
    uint32_t left;
    uint32_t right;
    uint32_t left_id;
    uint32_t right_id;
  };
  // A bucket is a chain of chunks of candidates, newest first: walking a bucket reads whole
  // lines, where a chain of single candidates spread over the pool cost a miss each (on a
  // million symbols that walk was most of the time, and made it grow faster than the input).
  constexpr uint32_t kChunk = 7;
  struct Chunk {
    uint32_t older;  // the bucket's previous chunk
    uint32_t count;
    Candidate items[kChunk];
  };
  // One 16-byte node per symbol, so visiting a symbol is one cache miss, not one per array.
  struct Node {
    uint32_t id;
    uint32_t end;
    uint32_t next;
    uint32_t prev;  // kDead once merged into its left neighbour
  };
  constexpr uint32_t kEnd = ~uint32_t{0};
  constexpr uint32_t kDead = ~uint32_t{0} - 1;
  const std::size_t n = syms.size();
  const auto none = static_cast<uint32_t>(n);
  std::vector<Node> nodes(n);
  for (std::size_t i = 0; i < n; ++i) {
    nodes[i] = {syms[i].id, syms[i].end, static_cast<uint32_t>(i + 1),
                i == 0 ? none : static_cast<uint32_t>(i - 1)};
  }
  std::vector<uint32_t> bucket(merge_count_, kEnd);  // rank -> its newest chunk
  std::vector<Chunk> chunks;
  chunks.reserve(n / kChunk + 1);
  // Chunks whose candidates the walk has taken, for new candidates: without them the pool grew
  // (and was copied) through the walk, and a megabyte of one letter took 88 MB of memory new
  // to the process a call.
  std::vector<uint32_t> spare_chunks;
  uint32_t lowest = kEnd;
  uint32_t highest = 0;
  // Pairs made during the walk with a rank at or below the one walked (merges that do not
  // build up): a min-heap by (rank, left), as the heap orders them.
  struct Overdue {
    uint32_t rank;
    Candidate pair;
  };
  auto later = [](const Overdue& a, const Overdue& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.pair.left > b.pair.left;
  };
  std::vector<Overdue> overdue;
  uint32_t walking = kEnd;  // the rank being walked (kEnd: before the walk)
  auto consider = [&](uint32_t left, uint32_t right) {
    if (left == none || right == none) return;
    uint32_t rank = 0;
    uint32_t result = 0;
    if (!find_merge(nodes[left].id, nodes[right].id, rank, result, cache)) return;
    const Candidate pair{left, right, nodes[left].id, nodes[right].id};
    if (walking != kEnd && rank <= walking) {
      overdue.push_back({rank, pair});
      std::push_heap(overdue.begin(), overdue.end(), later);
      return;
    }
    uint32_t& head = bucket[rank];
    if (head == kEnd || chunks[head].count == kChunk) {
      if (spare_chunks.empty()) {
        chunks.push_back(Chunk{head, 0, {}});
        head = static_cast<uint32_t>(chunks.size() - 1);
      } else {
        const uint32_t fresh = spare_chunks.back();
        spare_chunks.pop_back();
        chunks[fresh] = Chunk{head, 0, {}};
        head = fresh;
      }
    }
    Chunk& chunk = chunks[head];
    chunk.items[chunk.count++] = pair;
    lowest = std::min(lowest, rank);
    highest = std::max(highest, rank);
  };
  for (std::size_t i = 0; i + 1 < n; ++i) {
    consider(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1));
  }
  // Merges the pair if it still stands (a neighbour may have merged first), and considers the
  // new symbol's pairs.
  auto apply = [&](const Candidate& c) {
    Node& left = nodes[c.left];
    if (left.prev == kDead || left.next != c.right || left.id != c.left_id ||
        nodes[c.right].id != c.right_id) {
      return;
    }
    uint32_t r = 0;
    uint32_t result = 0;
    find_merge(c.left_id, c.right_id, r, result, cache);
    Node& right = nodes[c.right];
    left.id = result;
    left.end = right.end;
    left.next = right.next;
    right.prev = kDead;
    if (left.next != none) nodes[left.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  };
  std::vector<Candidate> due;
  std::vector<uint32_t> chain;
  auto by_left = [](const Candidate& a, const Candidate& b) { return a.left < b.left; };
  // c, then the pairs it made at this rank or below: they come before the rest of the bucket,
  // as they rank lower, or stand at or left of c.
  auto apply_due = [&](const Candidate& c) {
    apply(c);
    while (!overdue.empty()) {
      std::pop_heap(overdue.begin(), overdue.end(), later);
      const Candidate o = overdue.back().pair;
      overdue.pop_back();
      apply(o);
    }
  };
  for (uint32_t rank = lowest; lowest != kEnd && rank <= highest; ++rank) {
    if (bucket[rank] == kEnd) continue;
    walking = rank;
    // Oldest chunk first: candidates come out in the order they were made, which is already
    // left to right when one pass made them all (the first pass, or a run of one symbol).
    chain.clear();
    for (uint32_t h = bucket[rank]; h != kEnd; h = chunks[h].older) chain.push_back(h);
    std::reverse(chain.begin(), chain.end());
    bucket[rank] = kEnd;
    bool sorted = true;
    std::size_t total = 0;
    uint32_t last_left = 0;
    for (uint32_t h : chain) {
      const Chunk& chunk = chunks[h];
      for (uint32_t j = 0; j < chunk.count; ++j) {
        sorted = sorted && chunk.items[j].left >= last_left;
        last_left = chunk.items[j].left;
      }
      total += chunk.count;
    }
    if (sorted) {
      // Taken from the chunks where they stand (read by index: new candidates, all of other
      // ranks, may move the pool), each chunk spared once taken.
      for (uint32_t h : chain) {
        for (uint32_t j = 0; j < chunks[h].count; ++j) apply_due(Candidate(chunks[h].items[j]));
        spare_chunks.push_back(h);
      }
      continue;
    }
    due.clear();
    due.reserve(total);
    for (uint32_t h : chain) {
      due.insert(due.end(), chunks[h].items, chunks[h].items + chunks[h].count);
      spare_chunks.push_back(h);
    }
    std::sort(due.begin(), due.end(), by_left);
    for (const Candidate& c : due) apply_due(c);
  }
  std::size_t out = 0;
  for (std::size_t i = 0; i < n; ++i) {
    if (nodes[i].prev != kDead) syms[out++] = {nodes[i].id, syms[i].start, nodes[i].end};
  }
  syms.resize(out);
}

const std::vector<std::string_view>& BPEModel::tokens_by_id() const {
  // The id -> bytes table costs 16 bytes an id: built when first needed, not at load.
  std::call_once(decode_once_, [this] {
    vocab_.for_each([this](std::string_view token, uint32_t id) {
      if (id >= token_of_id_.size()) token_of_id_.resize(std::size_t{id} + 1);
      token_of_id_[id] = token;
    });
  });
  return token_of_id_;
}

const uint32_t* BPEModel::three_digit_ids() const {
  std::call_once(digits_once_, [this] {
    if (!options_.byte_symbols) return;
    // Each piece merged as every piece is (encode_word without its cache): the table holds
    // whatever the model gives, not an assumption about its vocabulary. (Through the piece
    // cache, its 1000 entries touched fresh 2 MiB pages of it, which took this machine's
    // kernel 4-8 ms on a process's first run of digits.)
    std::vector<uint32_t> table(1000);
    std::vector<TokenSpan> spans;
    for (unsigned v = 0; v < 1000; ++v) {
      const char digits[3] = {static_cast<char>('0' + v / 100), static_cast<char>('0' + v / 10 % 10),
                              static_cast<char>('0' + v % 10)};
      spans.clear();
      encode_word_uncached(std::string_view(digits, 3), spans);
      if (spans.size() != 1) return;
      table[v] = spans[0].id;
    }
    three_digit_ids_ = std::move(table);
  });
  return three_digit_ids_.empty() ? nullptr : three_digit_ids_.data();
}

const BPEModel::DecodeTable& BPEModel::decode_table() const {
  std::call_once(decode_table_once_, [this] {
    const std::vector<std::string_view>& token_of_id = tokens_by_id();
    std::size_t total = kDecodePad;
    for (std::string_view t : token_of_id) total += t.size();
    if (total > kNoDecode) throw Error("a vocabulary of 4 GiB of token bytes or more");
    DecodeTable table;
    table.bytes.reserve(total);
    table.spans.assign(token_of_id.size(), DecodeSpan{0, kNoDecode});
    for (std::size_t id = 0; id < token_of_id.size(); ++id) {
      if (token_of_id[id].data() == nullptr) continue;
      table.spans[id] = {static_cast<uint32_t>(table.bytes.size()),
                         static_cast<uint32_t>(token_of_id[id].size())};
      table.bytes.append(token_of_id[id]);
    }
    table.bytes.append(kDecodePad, '\0');
    decode_table_ = std::move(table);
  });
  return decode_table_;
}

std::size_t BPEModel::decode_bytes(const std::vector<uint32_t>& ids,
                                   const std::vector<uint32_t>& skip,
                                   const std::vector<uint32_t>& stop, std::string& out) const {
  const DecodeTable& table = decode_table();
  const char* const bytes = table.bytes.data();
  const DecodeSpan* const spans = table.spans.data();
  const std::size_t known = table.spans.size();
  // Listed ids are few (special tokens, added ones), and usually above every plain token: an
  // id below the least of them is neither skipped nor a stop without a search.
  const uint32_t least = std::min(skip.empty() ? ~uint32_t{0} : skip.front(),
                                  stop.empty() ? ~uint32_t{0} : stop.front());
  auto listed = [](const std::vector<uint32_t>& sorted, uint32_t id) {
    return !sorted.empty() && std::binary_search(sorted.begin(), sorted.end(), id);
  };
  // Bytes are written at `at` in out, grown (doubling) ahead of a token that does not fit, and
  // cut to what was written at the end: an append a token, with its own checks, was half the
  // time of decoding English. A token of up to kDecodePad bytes is copied as kDecodePad bytes
  // (its own, then what follows it in the table), where out has that much room: a call to
  // memcpy a token was an eighth of decoding English.
  std::size_t at = out.size();
  out.resize(std::max(out.capacity(), at + ids.size() * 4 + 2 * kDecodePad));
  std::size_t stopped = ids.size();
  for (std::size_t k = 0; k < ids.size(); ++k) {
    const uint32_t id = ids[k];
    if (id >= least) {
      if (listed(skip, id)) continue;
      if (listed(stop, id)) {
        stopped = k;
        break;
      }
    }
    if (id >= known) {
      stopped = k;
      break;
    }
    const DecodeSpan span = spans[id];
    if (span.length <= kDecodePad && out.size() - at >= kDecodePad) {
      std::memcpy(&out[at], bytes + span.offset, kDecodePad);
      at += span.length;
      continue;
    }
    if (span.length == kNoDecode) {
      stopped = k;
      break;
    }
    if (out.size() - at < span.length + kDecodePad) out.resize(2 * out.size() + span.length);
    std::memcpy(&out[at], bytes + span.offset, span.length);
    at += span.length;
  }
  out.resize(at);
  return stopped;
}

}  // namespace tokenmill
