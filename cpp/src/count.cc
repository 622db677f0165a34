#include "tokenmill/count.h"

#include <algorithm>
#include <stdexcept>
#include <thread>

#include "tokenmill/flat_map.h"

namespace tokenmill {

namespace {
// Below this many bytes a batch is counted on the calling thread: starting threads costs more.
constexpr std::size_t kMinBytesPerThread = 1 << 16;
}  // namespace

void PieceTable::add(std::string_view piece, uint64_t hash, uint64_t count, Place first) {
  if (2 * (entries_.size() + 1) > slots_.size()) grow();
  const std::size_t mask = slots_.size() - 1;
  std::size_t i = hash & mask;
  while (slots_[i].entry != 0) {
    const Slot& s = slots_[i];
    if (s.hash == hash) {
      Entry& e = entries_[s.entry - 1];
      if (e.len == piece.size() && this->piece(e) == piece) {
        e.count += count;
        if (first < e.first) e.first = first;
        return;
      }
    }
    i = (i + 1) & mask;
  }
  if (arena_.size() + piece.size() > UINT32_MAX || entries_.size() >= UINT32_MAX - 1) {
    throw std::length_error("piece counter: over 4 GiB of distinct pieces");
  }
  entries_.push_back({count, first, static_cast<uint32_t>(arena_.size()),
                      static_cast<uint32_t>(piece.size())});
  arena_.append(piece.data(), piece.size());
  slots_[i] = {hash, static_cast<uint32_t>(entries_.size())};
}

void PieceTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(std::max<std::size_t>(1024, old.size() * 2), Slot{0, 0});
  const std::size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.entry == 0) continue;
    std::size_t i = s.hash & mask;
    while (slots_[i].entry != 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

PieceCounter::PieceCounter(SplitPattern pattern, std::size_t threads)
    : pattern_(pattern), threads_(std::max<std::size_t>(1, threads)), tables_(threads_) {}

void PieceCounter::count_range(const std::vector<std::string_view>& texts, std::size_t begin,
                               std::size_t end, PieceTable& table) const {
  for (std::size_t t = begin; t < end; ++t) {
    const std::string_view text = texts[t];
    if (text.size() > UINT32_MAX) throw std::length_error("piece counter: a text of 4 GiB or more");
    std::size_t ends[64];
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t m = scan_pieces(pattern_, text, i, ends, 64);
      for (std::size_t k = 0; k < m; ++k) {
        const std::size_t j = ends[k];
        if (!piece_dropped(pattern_, text, i)) {
          const std::string_view piece = text.substr(i, j - i);
          table.add(piece, hash_bytes(piece), 1,
                    {texts_seen_ + t, static_cast<uint32_t>(i)});
        }
        i = j;
      }
    }
  }
}

void PieceCounter::add(const std::vector<std::string_view>& texts) {
  std::size_t bytes = 0;
  for (const std::string_view t : texts) bytes += t.size();
  const std::size_t n = std::min(threads_, std::max<std::size_t>(1, bytes / kMinBytesPerThread));
  if (n == 1) {
    count_range(texts, 0, texts.size(), tables_[0]);
  } else {
    // Contiguous shares of about equal bytes.
    std::vector<std::size_t> cuts{0};
    std::size_t acc = 0;
    for (std::size_t t = 0; t < texts.size() && cuts.size() < n; ++t) {
      acc += texts[t].size();
      if (acc * n >= bytes * cuts.size()) cuts.push_back(t + 1);
    }
    while (cuts.size() <= n) cuts.push_back(texts.size());
    std::vector<std::thread> workers;
    for (std::size_t k = 0; k < n; ++k) {
      workers.emplace_back([&, k] { count_range(texts, cuts[k], cuts[k + 1], tables_[k]); });
    }
    for (auto& w : workers) w.join();
  }
  texts_seen_ += texts.size();
}

std::vector<std::pair<std::string_view, uint64_t>> PieceCounter::items() {
  // The other threads' tables into the first (each piece's count summed, its earliest place
  // kept), then the entries in order of that place.
  PieceTable& all = tables_[0];
  for (std::size_t k = 1; k < tables_.size(); ++k) {
    for (const PieceTable::Entry& e : tables_[k].entries()) {
      const std::string_view piece = tables_[k].piece(e);
      all.add(piece, hash_bytes(piece), e.count, e.first);
    }
    tables_[k] = PieceTable();
  }
  struct Ordered {
    PieceTable::Place first;
    uint32_t entry;
  };
  const auto& entries = all.entries();
  std::vector<Ordered> order(entries.size());
  for (std::size_t i = 0; i < entries.size(); ++i) {
    order[i] = {entries[i].first, static_cast<uint32_t>(i)};
  }
  std::sort(order.begin(), order.end(),
            [](const Ordered& a, const Ordered& b) { return a.first < b.first; });
  std::vector<std::pair<std::string_view, uint64_t>> out;
  out.reserve(order.size());
  for (const Ordered& o : order) out.emplace_back(all.piece(entries[o.entry]), entries[o.entry].count);
  return out;
}

}  // namespace tokenmill
