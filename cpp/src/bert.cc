#include "tokenmill/bert.h"

#include <algorithm>

#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

uint32_t decode_at(std::string_view s, std::size_t i, std::size_t len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (len == 1) return b0;
  uint32_t cp = b0 & (0xFFu >> (len + 1));
  for (std::size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
  return cp;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// The normalized text being built: its UTF-8, and for each of its characters the byte where
// it starts and the input character it came from.
struct Normalized {
  std::string text;
  std::vector<uint32_t> byte_of;
  std::vector<uint32_t> source;
  void push(uint32_t cp, uint32_t from) {
    byte_of.push_back(static_cast<uint32_t>(text.size()));
    source.push_back(from);
    append_utf8(cp, text);
  }
};

}  // namespace

BertPipeline::BertPipeline(const std::vector<std::pair<uint32_t, std::string>>& changed,
                           const std::vector<std::pair<uint32_t, uint32_t>>& cjk,
                           const std::vector<uint32_t>& punctuation,
                           const std::vector<uint32_t>& spaces)
    : cjk_(cjk) {
  changed_.reserve(changed.size());
  for (const auto& [cp, text] : changed) {
    changed_.insert(cp, replacements_.size());
    replacements_.push_back(text);
  }
  flags_.reserve(punctuation.size() + spaces.size());
  for (uint32_t cp : spaces) flags_.insert(cp, kSpace);
  for (uint32_t cp : punctuation) flags_.insert(cp, kPunctuation);  // never also a space
}

bool BertPipeline::is_cjk(uint32_t cp) const {
  for (const auto& [lo, hi] : cjk_) {
    if (cp >= lo && cp <= hi) return true;
  }
  return false;
}

uint64_t BertPipeline::flags(uint32_t cp) const {
  uint64_t f = 0;
  return flags_.find(cp, f) ? f : 0;
}

void BertPipeline::encode(const WordPieceModel& model, std::string_view text,
                          Encoded& out) const {
  // 1. Normalize, remembering where each character came from.
  Normalized norm;
  norm.text.reserve(text.size() + 8);
  uint32_t index = 0;  // input character index
  for (std::size_t i = 0; i < text.size(); ++index) {
    const std::size_t len = utf8_char_len(text, i);
    const uint32_t cp = decode_at(text, i, len);
    i += len;
    uint64_t r = 0;
    const bool spaced = cp >= 0x3400 && is_cjk(cp);
    if (spaced) norm.push(' ', index);
    if (!changed_.find(cp, r)) {
      norm.push(cp, index);
    } else {
      const std::string& rep = replacements_[r];
      for (std::size_t k = 0; k < rep.size();) {
        const std::size_t n = utf8_char_len(rep, k);
        norm.push(decode_at(rep, k, n), index);
        k += n;
      }
    }
    if (spaced) norm.push(' ', index);
  }
  norm.byte_of.push_back(static_cast<uint32_t>(norm.text.size()));

  // 2. Pre-tokenize: runs of characters that are neither space nor punctuation, and each
  // punctuation character alone. 3. WordPiece each piece; spans map back through `source`.
  std::vector<TokenSpan> spans;
  const std::string_view t = norm.text;
  const std::size_t n = norm.source.size();
  auto emit = [&](std::size_t first, std::size_t last) {  // characters [first, last)
    spans.clear();
    model.encode_word(t.substr(norm.byte_of[first], norm.byte_of[last] - norm.byte_of[first]),
                      spans);
    for (const TokenSpan& s : spans) {
      out.ids.push_back(s.id);
      out.starts.push_back(norm.source[first + s.start]);
      out.ends.push_back(norm.source[first + s.end - 1] + 1);
    }
  };
  std::size_t word = n;  // where the current word started; n: in no word
  for (std::size_t c = 0; c < n; ++c) {
    const std::size_t b = norm.byte_of[c];
    const uint32_t cp = decode_at(t, b, norm.byte_of[c + 1] - b);
    const uint64_t f = cp == ' ' ? kSpace : flags(cp);
    if (f == 0) {
      if (word == n) word = c;
      continue;
    }
    if (word != n) emit(word, c);
    word = n;
    if (f == kPunctuation) emit(c, c + 1);
  }
  if (word != n) emit(word, n);
}

std::vector<Encoded> BertPipeline::encode_texts(const WordPieceModel& model,
                                                const std::vector<std::string>& texts,
                                                std::size_t threads) const {
  // Blocks of consecutive texts on the encoders' pool: threads of its own a call, each taking
  // every n-th text, wrote their results side by side in one array (their lines shared) and
  // let an exception in a thread end the process.
  std::vector<Encoded> out(texts.size());
  for_text_blocks(texts.size(), threads, [&](std::size_t first, std::size_t last) {
    for (std::size_t t = first; t < last; ++t) encode(model, texts[t], out[t]);
  });
  return out;
}

}  // namespace tokenmill
