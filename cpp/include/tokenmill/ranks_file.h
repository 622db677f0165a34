// tiktoken's ranks files: one "BASE64 RANK" line per token. Parsed in the core because the
// largest (o200k_base, 200k lines) would otherwise cost more to read than tiktoken takes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenmill/flat_map.h"

namespace tokenmill {

struct RanksFile {
  std::vector<std::string> tokens;  // raw bytes
  std::vector<uint32_t> ranks;
  StringMap rank_of;  // token -> rank (built anyway to find repeated tokens)
};

// Throws Error("line N: ...") on a malformed line, bad base64, or a repeated token or rank.
RanksFile parse_ranks(std::string_view data);

// Tokens spelled in GPT-2's byte-level alphabet (one character per byte), as UTF-8.
std::string spell_byte_alphabet(std::string_view bytes);

}  // namespace tokenmill
