#include "tokenmill/sp_normalizer.h"

#include <algorithm>
#include <cstring>

#include "tokenmill/error.h"
#include "tokenmill/utf8.h"

namespace tokenmill {

namespace {

// The fields of a Darts double-array unit (Darts-clone's layout, which sentencepiece uses).
bool unit_has_leaf(uint32_t unit) { return ((unit >> 8) & 1) != 0; }
uint32_t unit_value(uint32_t unit) { return unit & 0x7FFFFFFFu; }
uint32_t unit_label(uint32_t unit) { return unit & 0x800000FFu; }
uint32_t unit_offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

const std::string_view kSpaceSymbol = "\xE2\x96\x81";  // "▁"

}  // namespace

SentencePieceNormalizer::SentencePieceNormalizer(std::string charsmap,
                                                 const std::vector<std::string>& user_defined,
                                                 SentencePieceNormalizerOptions options)
    : blob_(std::move(charsmap)), options_(options) {
  if (!blob_.empty()) {
    // Layout: the trie's size in bytes (uint32, little-endian), the trie's uint32 units, then
    // the replacement strings.
    if (blob_.size() < 4) throw Error("precompiled_charsmap: shorter than its 4-byte header");
    const auto* b = reinterpret_cast<const unsigned char*>(blob_.data());
    const uint32_t trie_bytes = b[0] | (b[1] << 8) | (b[2] << 16) | (static_cast<uint32_t>(b[3]) << 24);
    if (trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob_.size() - 4) {
      throw Error("precompiled_charsmap: its header says the trie has " +
                  std::to_string(trie_bytes) + " bytes but " +
                  std::to_string(blob_.size() - 4) + " follow (expected a positive multiple of 4)");
    }
    units_.resize(trie_bytes / 4);
    for (std::size_t i = 0; i < units_.size(); ++i) {
      const unsigned char* u = b + 4 + 4 * i;
      units_[i] = u[0] | (u[1] << 8) | (u[2] << 16) | (static_cast<uint32_t>(u[3]) << 24);
    }
    strings_ = std::string_view(blob_).substr(4 + trie_bytes);
  }
  user_defined_.reserve(user_defined.size());
  for (std::size_t i = 0; i < user_defined.size(); ++i) {
    if (user_defined[i].empty()) continue;
    user_defined_.insert(user_defined[i], static_cast<uint32_t>(i));
    longest_user_defined_ = std::max(longest_user_defined_, user_defined[i].size());
    user_defined_first_[static_cast<unsigned char>(user_defined[i][0])] = true;
  }
}

int64_t SentencePieceNormalizer::longest_key(std::string_view s, std::size_t& length) const {
  int64_t found = -1;
  if (units_.empty()) return found;
  std::size_t node = unit_offset(units_[0]);
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0) break;
    node ^= c;
    if (node >= units_.size()) break;
    const uint32_t unit = units_[node];
    if (unit_label(unit) != c) break;
    node ^= unit_offset(unit);
    if (node >= units_.size()) break;
    if (unit_has_leaf(unit)) {
      found = unit_value(units_[node]);
      length = i + 1;
    }
  }
  return found;
}

std::string_view SentencePieceNormalizer::normalize_prefix(std::string_view text, std::size_t at,
                                                           std::size_t& consumed) const {
  const std::string_view rest = text.substr(at);
  // A user-defined piece is never normalized: the longest one here is kept as it is.
  const bool user = !rest.empty() && user_defined_first_[static_cast<unsigned char>(rest[0])];
  for (std::size_t len = user ? std::min(longest_user_defined_, rest.size()) : 0; len > 0;
       --len) {
    uint32_t id;
    if (user_defined_.find(rest.substr(0, len), id)) {
      consumed = len;
      return rest.substr(0, len);
    }
  }
  std::size_t length = 0;
  const int64_t value = longest_key(rest, length);
  if (value >= 0) {
    consumed = length;
    return replacement(value);
  }
  consumed = utf8_char_len(rest, 0);
  return rest.substr(0, consumed);
}

std::string_view SentencePieceNormalizer::replacement(int64_t value) const {
  const auto offset = static_cast<std::size_t>(value);
  if (offset >= strings_.size()) {
    throw Error("precompiled_charsmap: a replacement points at byte " + std::to_string(offset) +
                " of a " + std::to_string(strings_.size()) + "-byte string table");
  }
  const std::size_t end = strings_.find('\0', offset);
  if (end == std::string_view::npos) {
    throw Error("precompiled_charsmap: the replacement at byte " + std::to_string(offset) +
                " has no terminating NUL");
  }
  return strings_.substr(offset, end - offset);
}

void SentencePieceNormalizer::normalize(std::string_view text, std::string& out,
                                        std::vector<uint32_t>& starts,
                                        std::vector<uint32_t>& ends, bool offsets) const {
  out.clear();
  starts.clear();
  ends.clear();
  // (room for the text as it is, and a prefix: grown a doubling at a time, a megabyte's
  // vectors were copied twenty times over)
  out.reserve(text.size() + 3);
  if (offsets) {
    starts.reserve(text.size() + 1);
    ends.reserve(text.size() + 1);
  }
  std::size_t at = 0;
  uint32_t char_at = 0;  // characters of text before `at`
  std::size_t consumed = 0;
  auto advance = [&](std::size_t bytes) {
    char_at += static_cast<uint32_t>(utf8_count(text.substr(at, bytes)));
    at += bytes;
  };
  if (options_.remove_extra_whitespaces) {  // leading spaces (after mapping) go
    while (at < text.size() && normalize_prefix(text, at, consumed) == " ") advance(consumed);
  }
  if (at == text.size()) return;  // nothing but spaces: nothing at all
  const std::string_view space = options_.escape_whitespaces ? kSpaceSymbol : " ";
  auto emit = [&](std::string_view s, uint32_t from, uint32_t to) {
    out.append(s.data(), s.size());
    if (!offsets) return;
    for (std::size_t n = utf8_count(s); n > 0; --n) {
      starts.push_back(from);
      ends.push_back(to);
    }
  };
  if (options_.add_dummy_prefix) {
    // The prefix takes the span of the first character, as Hugging Face's Metaspace does.
    normalize_prefix(text, at, consumed);
    emit(space, char_at, char_at + static_cast<uint32_t>(utf8_count(text.substr(at, consumed))));
  }
  bool previous_space = options_.remove_extra_whitespaces;
  while (at < text.size()) {
    // Most characters are kept as they are: one that no user-defined piece starts with, no
    // key of the map starts at, and that is not a space, is copied with its span alone.
    const auto first = static_cast<unsigned char>(text[at]);
    std::size_t mapped = 0;
    const bool plain = first != ' ' && !user_defined_first_[first];
    const int64_t key = plain ? longest_key(text.substr(at), mapped) : -1;
    if (plain && key < 0) {
      const std::size_t len = utf8_char_len(text, at);
      out.append(text.data() + at, len);
      if (offsets) {
        starts.push_back(char_at);
        ends.push_back(char_at + 1);
      }
      at += len;
      ++char_at;
      previous_space = false;
      continue;
    }
    // (a key found above is the one normalize_prefix would find: no user-defined piece
    // starts here)
    std::string_view piece;
    if (plain) {
      piece = replacement(key);
      consumed = mapped;
    } else {
      piece = normalize_prefix(text, at, consumed);
    }
    const uint32_t from = char_at;
    const uint32_t to = char_at + static_cast<uint32_t>(utf8_count(text.substr(at, consumed)));
    if (previous_space) {
      while (!piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
      // A space collapsed into the one kept before it: sentencepiece counts it in that
      // one's span, so a lone "▁" covers the whole run ("a  s": (1, 3)).
      if (piece.empty() && !ends.empty()) ends.back() = to;
    }
    if (!piece.empty()) {
      for (std::size_t i = 0; i < piece.size();) {
        if (piece[i] == ' ') {
          emit(space, from, to);
          ++i;
        } else {
          const std::size_t next = std::min(piece.find(' ', i), piece.size());
          emit(piece.substr(i, next - i), from, to);
          i = next;
        }
      }
      previous_space = piece.back() == ' ';
    }
    advance(consumed);
    previous_space = previous_space && options_.remove_extra_whitespaces;
  }
  if (options_.remove_extra_whitespaces) {
    while (out.size() >= space.size() &&
           out.compare(out.size() - space.size(), space.size(), space) == 0) {
      out.resize(out.size() - space.size());
      if (offsets) {
        starts.pop_back();
        ends.pop_back();
      }
    }
  }
}

}  // namespace tokenmill
