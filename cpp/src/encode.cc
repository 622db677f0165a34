#include "tokenmill/encode.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>

namespace tokenmill {

namespace {

bool is_continuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// Byte spans -> character spans. A byte-level token may start or end inside a character; its
// span then covers that whole character, so offsets always slice whole characters.
void to_characters(std::string_view text, std::vector<uint32_t>& starts,
                   std::vector<uint32_t>& ends) {
  // Both lists are non-decreasing, so one forward walk each counts the characters before.
  auto convert = [&](std::vector<uint32_t>& offsets, bool is_end) {
    std::size_t byte = 0;
    uint32_t chars = 0;  // characters that start before `byte`
    for (uint32_t& off : offsets) {
      for (; byte < off && byte < text.size(); ++byte) {
        if (!is_continuation(text[byte])) ++chars;
      }
      if (is_end) {
        off = chars;  // the character holding byte off-1 has started before off
      } else {
        off = byte < text.size() && is_continuation(text[byte]) ? chars - 1 : chars;
      }
    }
  };
  convert(starts, false);
  convert(ends, true);
}

}  // namespace

void encode_text(const BPEModel& model, SplitPattern pattern, std::string_view text,
                 bool with_offsets, Encoded& out) {
  // Pieces are found a batch at a time and handed to the model together (encode_pieces).
  constexpr std::size_t kBatch = BPEModel::kPieceBatch;
  uint32_t bounds[2 * kBatch];
  thread_local std::vector<TokenSpan> spans;  // kept from text to text: no allocation a text
  // Room for a token every three bytes (English runs at four or five), so a text's ids rarely
  // grow by copying.
  out.ids.reserve(out.ids.size() + text.size() / 3 + 4);
  for (std::size_t i = 0; i < text.size();) {
    std::size_t count = 0;
    for (; count < kBatch && i < text.size();) {
      const std::size_t j = piece_end(pattern, text, i);
      if (!piece_dropped(pattern, text, i)) {
        bounds[2 * count] = static_cast<uint32_t>(i);
        bounds[2 * count + 1] = static_cast<uint32_t>(j);
        ++count;
      }
      i = j;
    }
    spans.clear();
    model.encode_pieces(text, bounds, count, spans);
    for (const TokenSpan& s : spans) out.ids.push_back(s.id);
    if (with_offsets) {
      for (const TokenSpan& s : spans) {
        out.starts.push_back(s.start);
        out.ends.push_back(s.end);
      }
    }
  }
  if (with_offsets) to_characters(text, out.starts, out.ends);
}

std::vector<Encoded> encode_texts(const BPEModel& model, SplitPattern pattern,
                                  const std::vector<std::string_view>& texts, bool with_offsets,
                                  std::size_t threads, const ReadyFn& ready) {
  std::vector<Encoded> out(texts.size());
  const std::size_t n = std::max<std::size_t>(1, std::min(threads, texts.size()));
  if (n == 1) {
    for (std::size_t t = 0; t < texts.size(); ++t) {
      encode_text(model, pattern, texts[t], with_offsets, out[t]);
    }
    if (ready && !texts.empty()) ready(0, texts.size(), out);
    return out;
  }
  // Workers take blocks of consecutive texts from a shared counter, so a long document does
  // not idle the others; each text is encoded into the worker's own buffers and copied into
  // its slot once (workers pushing into neighbouring slots would share cache lines all along).
  // Meanwhile this thread hands each finished block to `ready`, in order.
  const std::size_t block =
      std::max<std::size_t>(1, std::min<std::size_t>(64, texts.size() / (8 * n)));
  const std::size_t blocks = (texts.size() + block - 1) / block;
  std::vector<char> done(blocks, 0);  // guarded by mutex
  std::mutex mutex;
  std::condition_variable finished;
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  auto work = [&] {
    Encoded local;
    while (true) {
      const std::size_t b = next.fetch_add(1);
      if (b >= blocks) return;
      try {
        for (std::size_t t = b * block; t < std::min(texts.size(), (b + 1) * block); ++t) {
          local.ids.clear();
          local.starts.clear();
          local.ends.clear();
          encode_text(model, pattern, texts[t], with_offsets, local);
          out[t].ids.assign(local.ids.begin(), local.ids.end());
          if (with_offsets) {
            out[t].starts.assign(local.starts.begin(), local.starts.end());
            out[t].ends.assign(local.ends.begin(), local.ends.end());
          }
        }
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> lock(mutex);
        done[b] = 1;
      }
      finished.notify_one();
    }
  };
  std::vector<std::thread> workers;
  struct Join {  // the workers are joined on every way out, an exception from `ready` included
    std::vector<std::thread>& threads;
    ~Join() {
      for (auto& w : threads) {
        if (w.joinable()) w.join();
      }
    }
  } join{workers};
  for (std::size_t k = 0; k < std::min(n, blocks); ++k) workers.emplace_back(work);
  for (std::size_t b = 0; b < blocks && ready; ++b) {
    {
      std::unique_lock<std::mutex> lock(mutex);
      finished.wait(lock, [&] { return done[b] != 0; });
      if (failure) break;
    }
    ready(b * block, std::min(texts.size(), (b + 1) * block), out);
  }
  for (auto& w : workers) w.join();
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace tokenmill
