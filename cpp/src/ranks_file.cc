#include "tokenmill/ranks_file.h"

#include <array>

#include "tokenmill/error.h"
#include "tokenmill/flat_map.h"

namespace tokenmill {

namespace {

constexpr std::array<int8_t, 256> base64_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) v = -1;
  const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(alphabet[i])] = static_cast<int8_t>(i);
  return t;
}
constexpr std::array<int8_t, 256> kBase64 = base64_table();

// Strict base64 (padding required, as tiktoken's files have it); false if malformed.
bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  if (in.empty() || in.size() % 4 != 0) return false;
  for (std::size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + static_cast<std::size_t>(k)];
      if (c == '=') {
        if (i + 4 != in.size() || k < 2) return false;
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return false;  // data after padding
        v[k] = kBase64[static_cast<unsigned char>(c)];
        if (v[k] < 0) return false;
      }
    }
    const uint32_t n = (static_cast<uint32_t>(v[0]) << 18) | (static_cast<uint32_t>(v[1]) << 12) |
                       (static_cast<uint32_t>(v[2]) << 6) | static_cast<uint32_t>(v[3]);
    out.push_back(static_cast<char>((n >> 16) & 0xFF));
    if (pad < 2) out.push_back(static_cast<char>((n >> 8) & 0xFF));
    if (pad < 1) out.push_back(static_cast<char>(n & 0xFF));
  }
  return true;
}

}  // namespace

RanksFile parse_ranks(std::string_view data) {
  RanksFile out;
  std::size_t lines = 1;
  for (char c : data) lines += c == '\n';
  out.rank_of.reserve(lines);
  // The line of each rank seen: ranks are usually 0..n-1, so most fit a plain array (a hash
  // lookup per line here cost more than all the rest of the parse).
  std::vector<uint32_t> line_of_rank(lines, 0);
  PairMap line_of_large_rank;
  out.tokens.reserve(lines);
  out.ranks.reserve(lines);
  std::string token;
  std::size_t line_no = 0;
  for (std::size_t pos = 0; pos < data.size();) {
    std::size_t end = data.find('\n', pos);
    if (end == std::string_view::npos) end = data.size();
    std::string_view line = data.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const auto where = [line_no] { return "line " + std::to_string(line_no) + ": "; };
    const std::size_t space = line.find(' ');
    if (space == std::string_view::npos || space == 0 || space + 1 >= line.size()) {
      throw Error(where() + "expected 'BASE64 RANK', got '" + std::string(line.substr(0, 60)) +
                  "'");
    }
    const std::string_view b64 = line.substr(0, space);
    const std::string_view rank_text = line.substr(space + 1);
    uint64_t rank = 0;
    for (char c : rank_text) {
      if (c < '0' || c > '9' || rank > 0xFFFFFFFFull / 10) {
        throw Error(where() + "expected 'BASE64 RANK', got '" + std::string(line.substr(0, 60)) +
                    "'");
      }
      rank = rank * 10 + static_cast<uint64_t>(c - '0');
    }
    if (rank >= 0xFFFFFFFFull) throw Error(where() + "rank is too large");
    if (!decode_base64(b64, token)) {
      throw Error(where() + "'" + std::string(b64.substr(0, 40)) + "' is not valid base64");
    }
    uint64_t first_line = 0;
    if (rank < line_of_rank.size()) {
      first_line = line_of_rank[rank];
      if (first_line == 0) line_of_rank[rank] = static_cast<uint32_t>(line_no);
    } else if (!line_of_large_rank.find(rank, first_line)) {
      line_of_large_rank.insert(rank, line_no);
    }
    if (first_line != 0) {
      throw Error(where() + "rank " + std::to_string(rank) + " appears twice (first on line " +
                  std::to_string(first_line) + ")");
    }
    if (!out.rank_of.insert(token, static_cast<uint32_t>(rank))) {
      throw Error(where() + "token '" + std::string(b64) + "' (base64) appears twice");
    }
    out.tokens.push_back(token);
    out.ranks.push_back(static_cast<uint32_t>(rank));
  }
  return out;
}

std::string spell_byte_alphabet(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  // Inverse of decode_byte_alphabet: printable bytes keep their code point, the others take
  // U+0100 onwards in byte order.
  static const auto code_of = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool prints = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t[b] = prints ? b : next++;
    }
    return t;
  }();
  for (char c : bytes) {
    const uint32_t cp = code_of[static_cast<unsigned char>(c)];
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

}  // namespace tokenmill
