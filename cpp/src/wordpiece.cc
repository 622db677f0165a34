#include "tokenmill/wordpiece.h"

#include <algorithm>
#include <utility>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

WordPieceModel::WordPieceModel(const std::vector<std::string>& tokens,
                               const std::vector<uint32_t>& ids, WordPieceOptions options)
    : options_(std::move(options)) {
  if (tokens.size() != ids.size()) throw Error("tokens and ids differ in length");
  const std::string& prefix = options_.continuing_subword_prefix;
  initial_.reserve(tokens.size());
  continuing_.reserve(tokens.size() / 2 + 1);
  for (std::size_t k = 0; k < tokens.size(); ++k) {
    const std::string& t = tokens[k];
    initial_.insert(t, ids[k]);
    max_initial_bytes_ = std::max(max_initial_bytes_, t.size());
    if (t.compare(0, prefix.size(), prefix) == 0) {
      const std::string_view rest = std::string_view(t).substr(prefix.size());
      continuing_.insert(rest, ids[k]);
      max_continuing_bytes_ = std::max(max_continuing_bytes_, rest.size());
    }
  }
}

bool WordPieceModel::encode_word(std::string_view word, std::vector<TokenSpan>& out) const {
  // Byte offset where each character starts, and the end: characters [i, j) are the bytes
  // [bounds[i], bounds[j]).
  thread_local std::vector<std::size_t> bounds;
  bounds.clear();
  for (std::size_t i = 0; i < word.size(); i += utf8_char_len(word, i)) {
    bounds.push_back(i);
    if (bounds.size() > options_.max_input_chars_per_word) break;
  }
  const std::size_t n = bounds.size();
  bounds.push_back(word.size());
  const std::size_t mark = out.size();
  bool matched = n <= options_.max_input_chars_per_word;
  std::size_t start = 0;
  while (matched && start < n) {
    const StringMap& map = start == 0 ? initial_ : continuing_;
    const std::size_t longest = start == 0 ? max_initial_bytes_ : max_continuing_bytes_;
    // Candidates longer than every token cannot match: start from the longest that could.
    std::size_t end = n;
    while (end > start && bounds[end] - bounds[start] > longest) --end;
    uint32_t id = 0;
    for (; end > start; --end) {
      if (map.find(word.substr(bounds[start], bounds[end] - bounds[start]), id)) break;
    }
    if (end == start) {
      matched = false;
      break;
    }
    out.push_back({id, static_cast<uint32_t>(start), static_cast<uint32_t>(end)});
    start = end;
  }
  if (matched) return true;
  out.resize(mark);
  if (options_.unk_id < 0) return false;
  // subtle: a word cut off by max_input_chars_per_word still spans all its characters.
  const std::size_t chars = n <= options_.max_input_chars_per_word ? n : utf8_count(word);
  out.push_back({static_cast<uint32_t>(options_.unk_id), 0, static_cast<uint32_t>(chars)});
  return true;
}

std::size_t WordPieceModel::encode_words(const std::vector<std::string>& words,
                                         std::vector<uint32_t>& flat) const {
  std::vector<TokenSpan> spans;
  flat.reserve(flat.size() + words.size() * 8);
  for (std::size_t w = 0; w < words.size(); ++w) {
    spans.clear();
    if (!encode_word(words[w], spans)) return w;
    for (const TokenSpan& s : spans) {
      flat.insert(flat.end(), {s.id, static_cast<uint32_t>(w), s.start, s.end});
    }
  }
  return words.size();
}

}  // namespace tokenmill
