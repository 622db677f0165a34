// Whole-text encoding for byte-level BPE with a GPT-family split: scanner, then the merges of
// each piece's bytes, without a Python object per piece or per token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenmill/bpe.h"
#include "tokenmill/pretokenize.h"
#include "tokenmill/text.h"

namespace tokenmill {

// One text's tokens. starts/ends (character offsets into the text) are filled if asked.
struct Encoded {
  std::vector<uint32_t> ids;
  std::vector<uint32_t> starts;
  std::vector<uint32_t> ends;
};

// Runs fn(first, last) over a batch of `count` texts cut into blocks of consecutive ones, on up
// to `threads` threads (this one and the encoders' pool), each block once; the first exception
// is rethrown after every thread has stopped.
void for_text_blocks(std::size_t count, std::size_t threads,
                     const std::function<void(std::size_t, std::size_t)>& fn);

// model must use byte_symbols.
void encode_text(const BPEModel& model, SplitPattern pattern, std::string_view text,
                 bool with_offsets, Encoded& out);

// Each text's ids with their character offsets (encode_text's with_offsets), the texts split
// across up to `threads` threads in blocks, each converted to UTF-8 by the thread that encodes
// it: what a batch of Encodings is made from.
std::vector<Encoded> encode_texts_with_offsets(const BPEModel& model, SplitPattern pattern,
                                               const std::vector<TextRef>& texts,
                                               std::size_t threads);

// A block of consecutive texts' ids end to end: text first + k's are
// ids[offsets[k], offsets[k + 1]).
struct BlockIds {
  std::size_t first = 0;
  std::vector<uint32_t> ids;
  std::vector<uint64_t> offsets;
};

// ready(block): called on the calling thread for each block of texts as it is finished (not in
// input order), while the other blocks are still being encoded.
using BlockReadyFn = std::function<void(const BlockIds&)>;

// The texts split across up to `threads` threads in blocks, each text converted to UTF-8 by the
// thread that encodes it; every block is handed to `ready`, then freed. An exception from a
// worker or from `ready` ends the call (after every worker has stopped).
void encode_text_blocks(const BPEModel& model, SplitPattern pattern,
                        const std::vector<TextRef>& texts, std::size_t threads,
                        const BlockReadyFn& ready);

// Texts [first, last) encoded on the calling thread into `out` (first = first), their ids end to
// end. out's vectors are refilled, keeping their capacity: a caller that goes through a batch a
// range at a time reuses one buffer, whose pages are touched once and whose ids are still in
// the cache when the caller reads them.
void encode_text_range(const BPEModel& model, SplitPattern pattern,
                       const std::vector<TextRef>& texts, std::size_t first, std::size_t last,
                       BlockIds& out);

// An array whose items are not zeroed when it is made: for a buffer whose every item is written
// before anything reads it (zeroing 8 MB of ids first was a pass of its own, on one thread).
template <typename T>
class RawArray {
 public:
  RawArray() = default;
  explicit RawArray(std::size_t n) : items_(n != 0 ? new T[n] : nullptr), size_(n) {}
  T* data() { return items_.get(); }
  const T* data() const { return items_.get(); }
  std::size_t size() const { return size_; }

 private:
  std::unique_ptr<T[]> items_;
  std::size_t size_ = 0;
};

// What encode_texts_flat keeps of the ids.
enum class FlatOut {
  kCounts,     // none: offsets only
  kIds,        // uint32 ids: `ids` (one block's buffer, not copied) or `joined`
  kNarrowIds,  // uint16 ids in `narrow`; an id over 0xFFFF is an Error
};

// Every text's ids end to end: text t's are at [offsets[t], offsets[t + 1]) of whichever of
// ids, joined and narrow holds them (the others are empty). With FlatOut::kCounts, offsets
// still count each text's tokens.
struct FlatIds {
  std::vector<uint32_t> ids;
  RawArray<uint32_t> joined;
  RawArray<uint16_t> narrow;
  std::vector<uint64_t> offsets;
};

// As encode_texts, into one buffer: no vector per text, and with uint32 ids on one thread no
// copy at all. Blocks of texts are encoded on up to `threads` threads, then copied (or
// narrowed) into one buffer by as many, a block each. With a separator, every text's ids are
// followed by *separator, counted in the text's (a token file's documents).
FlatIds encode_texts_flat(const BPEModel& model, SplitPattern pattern,
                          const std::vector<TextRef>& texts, std::size_t threads, FlatOut out,
                          const uint32_t* separator = nullptr);

}  // namespace tokenmill
