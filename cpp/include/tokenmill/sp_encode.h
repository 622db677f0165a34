// SentencePiece's pipelines in the core: a text's spaces spelled "▁" (by a .model's own
// normalizer, or as Hugging Face's Metaspace and Llama's Prepend + Replace spell them), then a
// character-level model (BPE, or a .model's Unigram) over the result, each token given the
// characters of the text it covers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenmill/bpe.h"
#include "tokenmill/encode.h"
#include "tokenmill/sp_normalizer.h"
#include "tokenmill/text.h"
#include "tokenmill/unigram.h"

namespace tokenmill {

// Without a normalizer: whether a "▁" is put before a text (spelled with the first
// character's span, as Hugging Face aligns a prefix).
enum class SpacePrefix : uint8_t {
  kNone = 0,
  kAlways = 1,        // Prepend("▁")
  kUnlessSpaced = 2,  // Metaspace's: unless the text starts with "▁" once its spaces are
};

struct SpacePlan {
  const SentencePieceNormalizer* normalizer = nullptr;  // null: each " " becomes "▁"
  SpacePrefix prefix = SpacePrefix::kNone;              // (only without a normalizer)
  bool split = false;  // the text cut before every "▁" (Metaspace's split), pieces merged alone
};

// text's tokens, with the characters [start, end) of text each covers (without `offsets`,
// out.starts and out.ends are left empty). Thread-safe. Model: BPEModel or UnigramModel
// (instantiated in sp_encode.cc).
template <class Model>
void encode_spaced(const Model& model, const SpacePlan& plan, std::string_view text,
                   Encoded& out, bool offsets = true);

// The same for each text, on up to `threads` threads; prefixes[t] is text t's SpacePrefix.
template <class Model>
std::vector<Encoded> encode_spaced_texts(const Model& model,
                                         const SentencePieceNormalizer* normalizer, bool split,
                                         const std::vector<TextRef>& texts,
                                         const std::vector<uint8_t>& prefixes,
                                         std::size_t threads, bool offsets = true);

}  // namespace tokenmill
