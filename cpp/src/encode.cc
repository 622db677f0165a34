#include "tokenmill/encode.h"

#include "tokenmill/error.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <new>
#include <numeric>
#include <thread>

#include <unistd.h>

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

// Encoding threads kept from call to call, so a batch neither starts threads nor begins with
// their per-thread state empty (the pair cache, the scratch vectors; the piece cache was
// per-thread when this pool came, and two threads then ran 1.2-1.4x one). One batch runs on
// the pool at a time; a batch that finds it busy (another Python thread's, the GIL being
// released) starts threads of its own.
class Pool {
 public:
  // This process's pool (after a fork, the child makes its own: the parent's threads are not
  // there). Never destroyed: its threads wait on it until the process ends.
  static Pool& get() {
    static Pool* pool = new Pool();
    static pid_t owner = getpid();
    static std::mutex guard;
    std::lock_guard<std::mutex> lock(guard);
    if (getpid() != owner) {
      pool = new Pool();  // the parent's stays as it was (its mutexes may be held)
      owner = getpid();
    }
    return *pool;
  }

  // Starts fn on k threads of the pool; false (nothing started) if another batch has it.
  // Every start that returned true must be followed by wait(). fn must not throw.
  bool start(std::size_t k, const std::function<void()>& fn) {
    if (busy_.exchange(true)) return false;
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      while (threads_ < k) {
        std::thread([this] { loop(); }).detach();
        ++threads_;
      }
    } catch (...) {  // no thread to be had: the batch starts its own (or fails there)
      busy_.store(false);
      return false;
    }
    task_ = &fn;
    wanted_ = k;
    started_ = 0;
    finished_ = 0;
    ++generation_;
    wake_.notify_all();
    return true;
  }

  // Returns when every thread of the batch started has returned from fn.
  void wait() {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [&] { return finished_ == wanted_; });
      task_ = nullptr;
    }
    busy_.store(false);
  }

 private:
  void loop() {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return generation_ != seen && started_ < wanted_; });
      seen = generation_;
      ++started_;
      const std::function<void()>* fn = task_;
      lock.unlock();
      try {
        (*fn)();
      } catch (...) {  // fn catches its own; nothing may escape a pool thread
      }
      lock.lock();
      if (++finished_ == wanted_) done_.notify_one();
    }
  }

  std::atomic<bool> busy_{false};  // a batch has the pool
  std::mutex mutex_;                // guards the rest
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void()>* task_ = nullptr;
  uint64_t generation_ = 0;
  std::size_t threads_ = 0;
  std::size_t wanted_ = 0;
  std::size_t started_ = 0;
  std::size_t finished_ = 0;
};

// Appends text's ids to out.ids, its buffer grown by doubling (encode_text reserves room for
// one text only, which on a buffer of many texts would copy it at every text). The room made is
// for every token the text can have (a byte-level token is at least a byte) and a separator:
// encode_text's own guess, a token every three bytes, is passed by text in many scripts
// (cl100k_base reads 0.47 tokens a byte in 26 languages), and the buffer then grew inside the
// text too, by copies of every id before it. In a pass over those languages, 21 MB of ids were
// copied for 10.7 MB kept, with fresh pages for every copy. (Room the system refuses, for a
// text of gigabytes, is left to encode_text's guess and growth, as before.)
void append_text(const BPEModel& model, SplitPattern pattern, std::string_view text,
                 Encoded& out) {
  const std::size_t need = out.ids.size() + text.size() + 1;
  if (need > out.ids.capacity()) {
    try {
      out.ids.reserve(std::max(need, 2 * out.ids.capacity()));
    } catch (const std::bad_alloc&) {
    }
  }
  encode_text(model, pattern, text, false, out);
}

// Runs `work` on k more threads (the pool's, or threads of its own when another batch has the
// pool; fewer if no more can be started) while this thread runs `here`, and returns once all of
// them have, `here` throwing or not. `work` must not throw.
void with_workers(std::size_t k, const std::function<void()>& work,
                  const std::function<void()>& here) {
  Pool& pool = Pool::get();
  struct Join {  // the workers are joined on every way out
    Pool* pool;  // null when the pool was busy (or not needed)
    std::vector<std::thread> own;
    ~Join() {
      if (pool != nullptr) pool->wait();
      for (auto& w : own) w.join();
    }
  } join{k > 0 && pool.start(k, work) ? &pool : nullptr, {}};
  if (join.pool == nullptr) {
    try {
      for (std::size_t w = 0; w < k; ++w) join.own.emplace_back(work);
    } catch (...) {  // no more threads to be had: those started (and this one) do the work
    }
  }
  here();
}

// Runs fn(b) for every b in [0, blocks) on up to n threads, each b once; the first exception
// is rethrown after every thread has stopped.
void for_blocks(std::size_t blocks, std::size_t n, const std::function<void(std::size_t)>& fn) {
  if (blocks == 0) return;
  std::atomic<std::size_t> next{0};
  std::mutex mutex;
  std::exception_ptr failure;
  const std::function<void()> work = [&] {
    for (std::size_t b = next.fetch_add(1); b < blocks; b = next.fetch_add(1)) {
      try {
        fn(b);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        next.store(blocks);  // the rest are not started
      }
    }
  };
  with_workers(std::min(n, blocks) - 1, work, work);
  if (failure) std::rethrow_exception(failure);
}

// Texts per block when n threads share a batch of `count`: enough blocks for each thread to
// take several (a long document then does not idle the others), at most 64 texts each.
std::size_t block_texts(std::size_t count, std::size_t n) {
  return std::max<std::size_t>(1, std::min<std::size_t>(64, count / (8 * n)));
}

}  // namespace

void for_text_blocks(std::size_t count, std::size_t threads,
                     const std::function<void(std::size_t, std::size_t)>& fn) {
  const std::size_t n = std::max<std::size_t>(1, std::min(threads, count));
  const std::size_t block = block_texts(count, n);
  for_blocks((count + block - 1) / block, n, [&](std::size_t b) {
    fn(b * block, std::min(count, (b + 1) * block));
  });
}

namespace {

// A text's code units are asked for this many texts before its turn, their first
// kPrefetchTextBytes: each str is an object of its own somewhere in memory, past the core's
// caches in a pass over more text than they hold, and a paragraph is too short for the
// hardware's prefetcher to get going before the conversion or the scanner has read it.
constexpr std::size_t kTextsAhead = 2;
constexpr std::size_t kPrefetchTextBytes = 1024;

inline void prefetch_text(const TextRef& text) {
  const std::size_t bytes = std::min(text.length * std::max(1u, text.width), kPrefetchTextBytes);
  const char* const at = static_cast<const char*>(text.data);
  for (std::size_t b = 0; b < bytes; b += 64) __builtin_prefetch(at + b);
}

// Texts [first, last), each converted by this thread, encoded end to end into out.ids (emptied
// after each text unless keep_ids), each followed by *separator if given; text t's token count
// (its separator counted) goes to counts[t - first].
void encode_block_of(const BPEModel& model, SplitPattern pattern,
                     const std::vector<TextRef>& texts, std::size_t first, std::size_t last,
                     bool keep_ids, Encoded& out, uint64_t* counts,
                     const uint32_t* separator = nullptr) {
  for (std::size_t t = first; t < std::min(last, first + kTextsAhead); ++t) prefetch_text(texts[t]);
  for (std::size_t t = first; t < last; ++t) {
    if (t + kTextsAhead < last) prefetch_text(texts[t + kTextsAhead]);
    const std::size_t before = out.ids.size();
    append_text(model, pattern, utf8_of(texts[t]), out);
    if (separator != nullptr) out.ids.push_back(*separator);
    counts[t - first] = out.ids.size() - before;
    if (!keep_ids) out.ids.clear();
  }
  if (!keep_ids && out.ids.capacity() > kScratchKept) std::vector<uint32_t>().swap(out.ids);
  release_utf8_scratch();
}

// A run of ASCII digits at least this long, met where the scanner starts, takes the table
// (ending the batch of pieces before it early costs more than a short number saves).
constexpr std::size_t kDigitRunBytes = 12;

bool is_digit(char c) { return static_cast<unsigned char>(c - '0') < 10; }

// Whether text[i, i + count) are all ASCII digits.
bool digits_ahead(std::string_view text, std::size_t i, std::size_t count) {
  if (text.size() - i < count) return false;
  for (std::size_t k = 0; k < count; ++k) {
    if (!is_digit(text[i + k])) return false;
  }
  return true;
}

// Appends the ids (and, with offsets, the byte spans) of the run of ASCII digits at text[i] three
// at a time, up to the first three that are not all digits; returns where it stopped. Ids alone
// are written kDigitChunk at a time through a pointer into room made for them: a push_back a
// group (its capacity test, and the vector's end stored and loaded again each time) was most
// of the time of a megabyte of digits.
constexpr std::size_t kDigitChunk = 256;
std::size_t put_digit_groups(std::string_view text, std::size_t i, const uint32_t* digit_ids,
                             bool with_offsets, Encoded& out) {
  const char* const s = text.data();
  const std::size_t n = text.size();
  // The id of the three digits at s[at], or kNoGroup where they are not all digits.
  constexpr uint32_t kNoGroup = ~uint32_t{0};
  auto group = [&](std::size_t at) {
    const unsigned d0 = static_cast<unsigned char>(s[at] - '0');
    const unsigned d1 = static_cast<unsigned char>(s[at + 1] - '0');
    const unsigned d2 = static_cast<unsigned char>(s[at + 2] - '0');
    if ((d0 < 10) + (d1 < 10) + (d2 < 10) != 3) return kNoGroup;
    return digit_ids[d0 * 100 + d1 * 10 + d2];
  };
  if (with_offsets) {
    for (; n - i >= 3; i += 3) {
      const uint32_t id = group(i);
      if (id == kNoGroup) break;
      out.ids.push_back(id);
      out.starts.push_back(static_cast<uint32_t>(i));
      out.ends.push_back(static_cast<uint32_t>(i + 3));
    }
    return i;
  }
  while (true) {
    const std::size_t at = out.ids.size();
    const std::size_t room = std::min(kDigitChunk, (n - i) / 3);
    out.ids.resize(at + room);
    uint32_t* const to = out.ids.data() + at;
    std::size_t k = 0;
    for (; k < room; ++k, i += 3) {
      const uint32_t id = group(i);
      if (id == kNoGroup) break;
      to[k] = id;
    }
    out.ids.resize(at + k);
    if (k < kDigitChunk) return i;
  }
}

}  // namespace

void encode_text_range(const BPEModel& model, SplitPattern pattern,
                       const std::vector<TextRef>& texts, std::size_t first, std::size_t last,
                       BlockIds& out) {
  if (first > last || last > texts.size()) throw Error("a range of texts outside the batch");
  out.first = first;
  out.offsets.assign(last - first + 1, 0);
  Encoded buffer;
  buffer.ids.swap(out.ids);
  buffer.ids.clear();
  encode_block_of(model, pattern, texts, first, last, true, buffer, out.offsets.data() + 1);
  std::partial_sum(out.offsets.begin(), out.offsets.end(), out.offsets.begin());
  out.ids.swap(buffer.ids);
}

std::vector<Encoded> encode_texts_with_offsets(const BPEModel& model, SplitPattern pattern,
                                               const std::vector<TextRef>& texts,
                                               std::size_t threads) {
  std::vector<Encoded> out(texts.size());
  for_text_blocks(texts.size(), threads, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) {
      encode_text(model, pattern, utf8_of(texts[t]), true, out[t]);
    }
    release_utf8_scratch();
  });
  return out;
}

FlatIds encode_texts_flat(const BPEModel& model, SplitPattern pattern,
                          const std::vector<TextRef>& texts, std::size_t threads, FlatOut out,
                          const uint32_t* separator) {
  FlatIds flat;
  flat.offsets.assign(texts.size() + 1, 0);
  const bool keep_ids = out != FlatOut::kCounts;
  const std::size_t n = std::max<std::size_t>(1, std::min(threads, texts.size()));
  const std::size_t block =
      n == 1 ? std::max<std::size_t>(1, texts.size()) : block_texts(texts.size(), n);
  const std::size_t blocks = (texts.size() + block - 1) / block;
  // Each block's ids in its own buffer; with one block, that buffer is the result.
  std::vector<Encoded> parts(blocks);
  if (blocks == 1 && keep_ids) {
    // Room for an id a code unit, a guess most text stays under (with cl100k_base, English
    // 0.24, text in 26 languages 0.87), so the one buffer is rarely copied to grow
    // (append_text doubles it where the guess falls short: Chinese, 1.37). A bound (a token a
    // UTF-8 byte) would ask for over twice as much: past 32 MiB, glibc maps every such buffer
    // afresh, and a pass over 4 MB of English then took a thousand page faults more than
    // before.
    std::size_t units = 0;
    for (const TextRef& t : texts) units += t.length + 1;  // (and a separator each)
    try {
      parts[0].ids.reserve(units);
    } catch (const std::bad_alloc&) {  // (the buffer grows as the ids come)
    }
  }
  for_blocks(blocks, n, [&](std::size_t b) {
    // (offsets hold counts until the sums below)
    encode_block_of(model, pattern, texts, b * block, std::min(texts.size(), (b + 1) * block),
                    keep_ids, parts[b], flat.offsets.data() + b * block + 1, separator);
  });
  for (std::size_t t = 0; t < texts.size(); ++t) flat.offsets[t + 1] += flat.offsets[t];
  if (!keep_ids) return flat;
  const bool narrow = out == FlatOut::kNarrowIds;
  if (blocks == 1 && !narrow) {
    flat.ids = std::move(parts[0].ids);
    return flat;
  }
  // The copies into one buffer, shared out as the blocks were: with 8 MB of English on two
  // threads, one thread zeroing and filling the buffer was a fifth of the call. One block (one
  // thread's batch) narrowed is cut into n runs.
  const std::size_t total = flat.offsets.back();
  struct Run {
    const uint32_t* from;
    std::size_t count;
    std::size_t at;  // where in the buffer
  };
  std::vector<Run> runs;
  if (blocks == 1) {
    for (std::size_t c = 0; c < n; ++c) {
      const std::size_t a = total * c / n;
      runs.push_back({parts[0].ids.data() + a, total * (c + 1) / n - a, a});
    }
  } else {
    for (std::size_t b = 0; b < blocks; ++b) {
      runs.push_back({parts[b].ids.data(), parts[b].ids.size(), flat.offsets[b * block]});
    }
  }
  for (const Run& r : runs) {
    if (r.at > total || r.count > total - r.at) throw Error("a block's ids outside the batch's");
  }
  if (narrow) {
    flat.narrow = RawArray<uint16_t>(total);
  } else {
    flat.joined = RawArray<uint32_t>(total);
  }
  for_blocks(runs.size(), n, [&](std::size_t j) {
    const Run& r = runs[j];
    if (narrow) {
      uint16_t* const to = flat.narrow.data() + r.at;
      uint32_t bits = 0;  // every id's bits, or'ed: one test for the run
      for (std::size_t k = 0; k < r.count; ++k) {
        bits |= r.from[k];
        to[k] = static_cast<uint16_t>(r.from[k]);
      }
      if (bits > 0xFFFF) throw Error("an id does not fit in uint16");
    } else {
      std::copy(r.from, r.from + r.count, flat.joined.data() + r.at);
    }
    if (blocks > 1) std::vector<uint32_t>().swap(parts[j].ids);  // (run j is block j's)
  });
  return flat;
}

namespace {

// encode_text's spans of a batch of pieces, kept by each thread.
[[gnu::noinline]] std::vector<TokenSpan>& offset_spans() {
  thread_local std::vector<TokenSpan> spans;
  return spans;
}

}  // namespace

void encode_text(const BPEModel& model, SplitPattern pattern, std::string_view text,
                 bool with_offsets, Encoded& out) {
  // (Only a text that may hold a long piece keeps them: a thread-local's reach in this library
  // is a call, which short texts, most of a batch, are spared.)
  const LongPieceText long_pieces(text.size() >= backtrack_threshold());
  // Pieces are found a batch at a time and handed to the model together (encode_pieces); a
  // piece long enough to be cut by backtracking gives its ids straight to out.ids.
  constexpr std::size_t kBatch = BPEModel::kPieceBatch;
  uint32_t bounds[2 * kBatch];
  std::size_t count = 0;
  // (kept from text to text: no allocation a text; reached only with offsets, each reach of a
  // thread-local in this library being a call)
  std::vector<TokenSpan>* const spans = with_offsets ? &offset_spans() : nullptr;
  const std::size_t long_piece = with_offsets ? ~std::size_t{0} : backtrack_threshold();
  // Room for a token every three bytes (English runs at four or five), so a text's ids rarely
  // grow by copying; from 64 kB to 16 MB of text, a token a byte, which no byte-level text
  // exceeds. (Such a reserve is a mapping of its own, whose pages are taken only as written;
  // ids grown by copying took a megabyte of base64's pages twice at every call: two tokens
  // every three bytes. Small texts keep the smaller room, as a batch's are held together.)
  const bool large = text.size() >= (std::size_t{1} << 16) && text.size() <= (std::size_t{1} << 24);
  out.ids.reserve(out.ids.size() + (large ? text.size() : text.size() / 3) + 4);
  // Bounds and spans are 32-bit: bounds count from `window`, moved on before they would not fit
  // (offsets, which count from the text's start, need the text under 4 GiB).
  std::size_t window = 0;
  constexpr std::size_t kMax32 = 0xFFFFFFFFu;
  PieceMisses misses;  // the ids path's record of the text's batches in the piece cache
  if (with_offsets && text.size() > kMax32) {
    throw Error("a text of 4 GiB or more has offsets that do not fit in 32 bits");
  }
  auto flush = [&] {
    if (count == 0) return;
    if (!with_offsets) {
      model.encode_pieces_ids(text.substr(window), bounds, count, out.ids, &misses);
      count = 0;
      return;
    }
    spans->clear();
    model.encode_pieces(text.substr(window), bounds, count, *spans);
    count = 0;
    for (const TokenSpan& s : *spans) {
      out.ids.push_back(s.id);
      out.starts.push_back(s.start);
      out.ends.push_back(s.end);
    }
  };
  const bool drops = pattern == SplitPattern::kWords;  // the only pattern with dropped pieces
  // cl100k's and o200k's patterns: a piece that starts with a digit is \p{N}{1,3}, so a run
  // of ASCII digits is cut three at a time (its last one or two digits may join a digit beyond
  // ASCII, and are left to the scanner). Where every three digits are one token, a long run
  // met where the scanner would start takes its ids from a table (asked for once a text, when
  // a run is met: std::call_once sets two thread-locals and clears them a call, done or not).
  bool digit_groups = pattern == SplitPattern::kCL100K || pattern == SplitPattern::kO200K;
  const bool fast_bounds = !drops && text.size() <= kMax32;
  // Ids only, nothing dropped: the scanner's ends go to the model as they are (a piece long
  // enough for backtracking is cut there, which it does for pieces too long for the piece
  // cache: with the threshold lowered below that, as tests do, bounds are made as for the
  // other cases).
  const bool run = !with_offsets && !drops && long_piece > BPEModel::kPieceCacheBytes;
  const uint32_t* digit_ids = nullptr;
  std::size_t run_ends[kBatch + 1];  // [0]: the first piece's start
  std::size_t piece_ends[kBatch];
  std::size_t scanned = 0;
  std::size_t next = 0;  // piece_ends[next, scanned) are still to be taken
  for (std::size_t i = 0; i < text.size();) {
    if (next == scanned) {
      if (digit_groups && digits_ahead(text, i, kDigitRunBytes)) {
        if (digit_ids == nullptr) digit_ids = model.three_digit_ids();
        if (digit_ids != nullptr) {
          flush();
          i = put_digit_groups(text, i, digit_ids, with_offsets, out);
          continue;
        }
        digit_groups = false;  // no table for this model: runs go through the scanner
      }
      if (run) {
        run_ends[0] = i;
        const std::size_t got = scan_pieces(pattern, text, i, run_ends + 1, kBatch);
        model.encode_run_ids(text, run_ends + 1, got, out.ids, &misses);
        i = run_ends[got];
        continue;
      }
      scanned = scan_pieces(pattern, text, i, piece_ends, kBatch);
      next = 0;
      if (fast_bounds) {
        // The common case in a loop of its own, the checks below hoisted out of it: a pattern
        // that drops nothing, a text whose bounds all fit 32 bits (window stays 0). A piece
        // long enough for backtracking leaves it, to be taken below.
        std::size_t k = 0;
        std::size_t at = i;
        std::size_t c = count;
        for (; k < scanned; ++k) {
          const std::size_t j = piece_ends[k];
          if (j - at >= long_piece) break;
          bounds[2 * c] = static_cast<uint32_t>(at);
          bounds[2 * c + 1] = static_cast<uint32_t>(j);
          at = j;
          if (++c == kBatch) {
            count = c;
            flush();
            c = 0;
          }
        }
        count = c;
        i = at;
        next = k;
        if (next == scanned) continue;
      }
    }
    const std::size_t j = piece_ends[next++];
    if (!drops || !piece_dropped(pattern, text, i)) {
      if (j - i >= long_piece) {
        flush();
        if (model.encode_long_ids(text.substr(i, j - i), out.ids)) {
          i = j;
          continue;
        }
      }
      if (j - window > kMax32) {
        flush();
        window = i;
        if (j - i > kMax32) throw Error("a piece of 4 GiB or more that backtracking cannot cut");
      }
      bounds[2 * count] = static_cast<uint32_t>(i - window);
      bounds[2 * count + 1] = static_cast<uint32_t>(j - window);
      if (++count == kBatch) flush();
    }
    i = j;
  }
  flush();
  if (with_offsets) {
    if (spans->capacity() > kScratchKept) std::vector<TokenSpan>().swap(*spans);
    to_characters(text, out.starts, out.ends);
  }
}

void encode_text_blocks(const BPEModel& model, SplitPattern pattern,
                        const std::vector<TextRef>& texts, std::size_t threads,
                        const BlockReadyFn& ready) {
  if (texts.empty()) return;
  const std::size_t n = std::max<std::size_t>(1, std::min(threads, texts.size()));
  // Workers take blocks of consecutive texts from a shared counter, so a long document does
  // not idle the others, and encode each block into one buffer of its own (a vector a text,
  // allocated by a worker and freed by this thread, cost an allocation and a copy a text and
  // sent the frees to the worker's allocator lock). Meanwhile this thread hands each finished
  // block to `ready`.
  const std::size_t block = block_texts(texts.size(), n);
  const std::size_t blocks = (texts.size() + block - 1) / block;
  std::vector<BlockIds> parts(blocks);
  std::vector<std::size_t> finished_blocks;  // in the order they finished; guarded by mutex
  finished_blocks.reserve(blocks);
  std::size_t handed = 0;  // finished_blocks[0, handed) went to `ready`
  std::mutex mutex;
  std::condition_variable finished;
  std::atomic<std::size_t> next{0};
  std::exception_ptr failure;
  // The first failure is kept and no block is started after it (the workers stop at their
  // next block instead of encoding the rest of the batch for nothing).
  auto fail = [&](std::exception_ptr e) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!failure) failure = std::move(e);
    next.store(blocks);
  };
  // Takes the next block and encodes it; false when none is left.
  auto encode_block = [&] {
    const std::size_t b = next.fetch_add(1);
    if (b >= blocks) return false;
    BlockIds& part = parts[b];
    try {
      encode_text_range(model, pattern, texts, b * block, std::min(texts.size(), (b + 1) * block),
                        part);
    } catch (...) {
      release_utf8_scratch();
      fail(std::current_exception());
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished_blocks.push_back(b);
    }
    finished.notify_one();
    return true;
  };
  auto work = [&] {
    while (encode_block()) {
    }
  };
  // n - 1 workers run on the pool (or, when another batch has it, on threads of their own);
  // this thread is the n-th: it hands each finished block to `ready` as soon as it can, and
  // encodes a block itself when none is waiting (a thread of its own for `ready`, beside n
  // encoders, left the cores oversubscribed and then idle; handing blocks over in input order
  // left a tail of them to hand over after the encoding was done).
  with_workers(std::min(n, blocks) - 1, work, [&] {
    for (std::size_t delivered = 0; delivered < blocks;) {
      std::size_t b = blocks;  // none waiting
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (failure) return;
        if (handed < finished_blocks.size()) b = finished_blocks[handed++];
      }
      if (b < blocks) {
        try {
          ready(parts[b]);
        } catch (...) {
          fail(std::current_exception());
          return;
        }
        std::vector<uint32_t>().swap(parts[b].ids);
        std::vector<uint64_t>().swap(parts[b].offsets);
        ++delivered;
      } else if (!encode_block()) {  // nothing left to take: wait for the others
        std::unique_lock<std::mutex> lock(mutex);
        finished.wait(lock, [&] { return handed < finished_blocks.size() || failure; });
      }
    }
  });
  if (failure) std::rethrow_exception(failure);
}

}  // namespace tokenmill
