#include "tokenmill/count.h"

#include <algorithm>
#include <string_view>
#include <thread>

namespace tokenmill {

namespace {
// Below this many bytes a batch is counted on the calling thread: starting threads costs more.
constexpr std::size_t kMinBytesPerThread = 1 << 16;
}  // namespace

PieceCounter::PieceCounter(SplitPattern pattern, std::size_t threads)
    : pattern_(pattern), threads_(std::max<std::size_t>(1, threads)) {}

void PieceCounter::count_range(const std::vector<std::string>& texts, std::size_t begin,
                               std::size_t end, Local& out) const {
  auto& [index, items] = out;
  std::string key;
  for (std::size_t t = begin; t < end; ++t) {
    const std::string_view text = texts[t];
    for (std::size_t i = 0; i < text.size();) {
      const std::size_t j = piece_end(pattern_, text, i);
      if (piece_dropped(pattern_, text, i)) {
        i = j;
        continue;
      }
      key.assign(text.data() + i, j - i);
      auto it = index.find(key);
      if (it == index.end()) {
        index.emplace(key, items.size());
        items.emplace_back(key, 1);
      } else {
        ++items[it->second].second;
      }
      i = j;
    }
  }
}

void PieceCounter::merge(Local& local) {
  for (auto& [piece, count] : local.second) {
    auto it = index_.find(piece);
    if (it == index_.end()) {
      index_.emplace(piece, items_.size());
      items_.emplace_back(std::move(piece), count);
    } else {
      items_[it->second].second += count;
    }
  }
}

void PieceCounter::add(const std::vector<std::string>& texts) {
  std::size_t bytes = 0;
  for (const std::string& t : texts) bytes += t.size();
  const std::size_t n = std::min(threads_, std::max<std::size_t>(1, bytes / kMinBytesPerThread));
  std::vector<Local> locals(n);
  if (n == 1) {
    count_range(texts, 0, texts.size(), locals[0]);
  } else {
    // Contiguous shares of about equal bytes, so merging them in order keeps first-seen order.
    std::vector<std::size_t> cuts{0};
    std::size_t acc = 0;
    for (std::size_t t = 0; t < texts.size() && cuts.size() < n; ++t) {
      acc += texts[t].size();
      if (acc * n >= bytes * cuts.size()) cuts.push_back(t + 1);
    }
    while (cuts.size() <= n) cuts.push_back(texts.size());
    std::vector<std::thread> workers;
    for (std::size_t k = 0; k < n; ++k) {
      workers.emplace_back([&, k] { count_range(texts, cuts[k], cuts[k + 1], locals[k]); });
    }
    for (auto& w : workers) w.join();
  }
  for (auto& local : locals) merge(local);
}

}  // namespace tokenmill
