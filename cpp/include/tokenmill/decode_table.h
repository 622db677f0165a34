// Decoding through a table of each id's text, for the decoder chains that are a run of steps
// applied to each token alone (Replace, Strip, Metaspace), then byte fallback, then a fuse:
// SentencePiece's models, as a .model or a tokenizer.json. The Python side runs those steps
// over the vocabulary once and hands their results here; a decode is then one pass over the
// ids, where the chain ran in Python over every token of every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tokenmill {

// How a run of byte tokens (<0xNN>) becomes text.
enum class ByteRuns : int {
  kWhole = 0,    // valid UTF-8 as it is, else one U+FFFD a byte (Hugging Face's ByteFallback)
  kPerByte = 1,  // each byte that starts no valid character is one U+FFFD (sentencepiece)
  kRaw = 2,      // the bytes as they are (decode_bytes)
};

// One id's entry: its text's span in the table's bytes, or the byte it stands for.
struct DecodeEntry {
  uint32_t begin = 0;
  uint32_t end = 0;
  int16_t byte = -1;      // 0..255: a byte token; -1: text; -2: no such id
  bool special = false;   // left out when special tokens are skipped
};

class DecodeTable {
 public:
  // Entries for the ids from 0, twice: as the chain makes a token anywhere but first, and as
  // it makes the first token it is given (a dummy prefix's strip); spans index `text`.
  DecodeTable(std::string text, std::vector<DecodeEntry> entries,
              std::vector<DecodeEntry> first_entries);

  // Appends the text of `ids` to `out`. A skipped special token ends a run of byte tokens when
  // `special_ends_runs` (a control piece in sentencepiece). The first token kept takes its
  // first entry, and so does each one after it while the text is empty if
  // `first_while_empty` (sentencepiece's leading pieces when it removes extra whitespace).
  // Returns n, or the position of the first id the table does not hold (out then holds a
  // part).
  std::size_t decode(const uint32_t* ids, std::size_t n, bool skip_special,
                     bool special_ends_runs, bool first_while_empty, ByteRuns runs,
                     std::string& out) const;

  std::size_t size() const { return entries_.size(); }

 private:
  std::string text_;
  std::vector<DecodeEntry> entries_;
  std::vector<DecodeEntry> first_entries_;
};

// Whether s is valid UTF-8 as Python's strict decoder reads it (no overlong forms, no
// surrogates, nothing past U+10FFFF).
bool valid_utf8(std::string_view s);

// The length of the valid character s starts with, or 0 if it starts none.
std::size_t valid_char_len(std::string_view s);

}  // namespace tokenmill
