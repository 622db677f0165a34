#include "tokenmill/decode_table.h"

#include <stdexcept>
#include <utility>

namespace tokenmill {

namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

bool continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// A run of bytes as text, appended to out.
void flush_run(std::string& run, ByteRuns runs, std::string& out) {
  if (run.empty()) return;
  if (runs == ByteRuns::kRaw || valid_utf8(run)) {
    out += run;
  } else if (runs == ByteRuns::kWhole) {
    for (std::size_t k = 0; k < run.size(); ++k) out += kReplacement;
  } else {
    std::string_view rest(run);
    while (!rest.empty()) {
      const std::size_t n = valid_char_len(rest);
      if (n == 0) {
        out += kReplacement;
        rest.remove_prefix(1);
      } else {
        out.append(rest.data(), n);
        rest.remove_prefix(n);
      }
    }
  }
  run.clear();
}

}  // namespace

std::size_t valid_char_len(std::string_view s) {
  if (s.empty()) return 0;
  const auto c = static_cast<unsigned char>(s[0]);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) low = 0xA0;   // overlong
    if (c == 0xED) high = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) low = 0x90;   // overlong
    if (c == 0xF4) high = 0x8F;  // past U+10FFFF
  } else {
    return 0;
  }
  if (s.size() < n) return 0;
  const auto second = static_cast<unsigned char>(s[1]);
  if (second < low || second > high) return 0;
  for (std::size_t k = 2; k < n; ++k) {
    if (!continuation(static_cast<unsigned char>(s[k]))) return 0;
  }
  return n;
}

bool valid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    const std::size_t n = valid_char_len(s.substr(i));
    if (n == 0) return false;
    i += n;
  }
  return true;
}

DecodeTable::DecodeTable(std::string text, std::vector<DecodeEntry> entries,
                         std::vector<DecodeEntry> first_entries)
    : text_(std::move(text)), entries_(std::move(entries)),
      first_entries_(std::move(first_entries)) {
  if (first_entries_.size() != entries_.size()) {
    throw std::invalid_argument("a decode table needs as many first entries as entries");
  }
  for (const auto* table : {&entries_, &first_entries_}) {
    for (const DecodeEntry& e : *table) {
      if (e.begin > e.end || e.end > text_.size() || e.byte < -2 || e.byte > 255) {
        throw std::invalid_argument("a decode table's entry is out of bounds");
      }
    }
  }
}

std::size_t DecodeTable::decode(const uint32_t* ids, std::size_t n, bool skip_special,
                                bool special_ends_runs, bool first_while_empty, ByteRuns runs,
                                std::string& out) const {
  std::string run;  // bytes of the byte tokens met since the last text
  bool first = true;
  const std::size_t empty = out.size();  // (out may hold text before this call's)
  for (std::size_t k = 0; k < n; ++k) {
    const uint32_t id = ids[k];
    if (id >= entries_.size()) return k;
    const DecodeEntry& any = entries_[id];
    if (any.byte == -2) return k;
    if (skip_special && any.special) {
      if (special_ends_runs) flush_run(run, runs, out);
      continue;
    }
    const DecodeEntry& e = first ? first_entries_[id] : any;
    if (e.byte >= 0) {
      if (runs == ByteRuns::kRaw) {
        out += static_cast<char>(e.byte);
      } else {
        run += static_cast<char>(e.byte);
      }
      first = false;
      continue;
    }
    flush_run(run, runs, out);
    out.append(text_, e.begin, e.end - e.begin);
    first = first_while_empty && out.size() == empty;
  }
  flush_run(run, runs, out);
  return n;
}

}  // namespace tokenmill
