// Hand-written scanners for the pre-tokenizer patterns of the GPT family. Each splits text
// exactly as the `regex` module's findall does with the pattern (no regex engine on the hot
// path): tests hold them equal on random text and on every line of the corpora.
//
//   kGPT2    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//            (and tiktoken's r50k/p50k spelling of it, which splits the same)
//   kCL100K  '(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
//            ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s
//   kO200K   [^\r\n\p{L}\p{N}]?[UPPER]*[LOWER]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
//            [^\r\n\p{L}\p{N}]?[UPPER]+[LOWER]*(?i:'s|...)?|\p{N}{1,3}|
//             ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
//            with UPPER = \p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M} and LOWER = \p{Ll}\p{Lm}\p{Lo}\p{M}
//   kWords   \w+|[^\w\s]+   (the Whitespace pre-tokenizer; its whitespace is dropped)
//
// Every character of any text is matched by some alternative of the GPT patterns, so the pieces
// are contiguous and cover the text: a scanner only has to find where each piece ends. kWords
// leaves out runs of whitespace: its scanner returns them as pieces that piece_dropped names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace tokenmill {

enum class SplitPattern : int { kGPT2 = 0, kCL100K = 1, kO200K = 2, kWords = 3 };

// Where each of the next pieces from byte i ends, up to `max` of them (fewer at the text's
// end): written to ends, the count returned. The scanner is chosen once a call.
std::size_t scan_pieces(SplitPattern pattern, std::string_view text, std::size_t i,
                        std::size_t* ends, std::size_t max);

// True for a piece (starting at byte i) that the pattern does not match: kWords's whitespace.
bool piece_dropped(SplitPattern pattern, std::string_view text, std::size_t i);

// Appends the byte offset where each piece of text ends (dropped pieces included).
void pretokenize(SplitPattern pattern, std::string_view text, std::vector<uint32_t>& ends);

// The same over `length` code points stored `width` bytes each (1, 2 or 4: how Python keeps a
// str), appending character offsets. Any code point is accepted (a lone surrogate is a
// character of no class, as the regex module sees it).
void pretokenize_units(SplitPattern pattern, const void* data, std::size_t length, int width,
                       std::vector<uint32_t>& ends);

}  // namespace tokenmill
