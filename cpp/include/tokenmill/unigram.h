// Unigram language-model segmentation (Kudo 2018, "Subword Regularization", arXiv:1804.10959).
// A word's lattice holds one edge per vocabulary piece found at each character position; the
// model scores a segmentation by the sum of its pieces' log probabilities. Encoding is Viterbi;
// n-best and sampling (the paper's subword regularization) and the EM expectations of training
// all walk the same lattice. A model is immutable after construction, so every method can run
// on many threads with the GIL released.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tokenmill/bpe.h"  // TokenSpan
#include "tokenmill/flat_map.h"

namespace tokenmill {

// SentencePiece's piece types; only NORMAL and USER_DEFINED pieces are matched in text.
enum PieceKind : uint8_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct UnigramOptions {
  int64_t unk_id = -1;         // -1: a character no piece covers is an error
  bool byte_fallback = false;  // an unknown stretch becomes its <0xNN> byte pieces
  // sentencepiece's arithmetic: scores are float32 and Viterbi sums them in float32 (Hugging
  // Face uses double). Near-ties (the same pieces in another order) fall by this rounding.
  bool float32_sums = false;
};

// One segmentation: its tokens ([start, end) in characters of the word) and total score.
struct Segmentation {
  std::vector<TokenSpan> tokens;
  double score = 0.0;
};

class UnigramModel {
 public:
  UnigramModel(const std::vector<std::string>& pieces, const std::vector<double>& scores,
               const std::vector<uint8_t>& kinds, UnigramOptions options);

  // The best segmentation (Viterbi), consecutive unknowns merged into one, then byte fallback.
  void encode_word(std::string_view word, std::vector<TokenSpan>& out) const;
  // The n best segmentations, best first (unknowns merged as in encode_word).
  std::vector<Segmentation> nbest(std::string_view word, std::size_t n) const;
  // One segmentation drawn for subword regularization, as sentencepiece defines it:
  // nbest_size < 0: from the whole lattice, P(seg) ~ exp(alpha * score) (forward filtering,
  // backward sampling); nbest_size > 1: among the nbest_size best, P ~ exp(alpha * score);
  // 0 or 1: no sampling (Viterbi). rng is a splitmix64 state, advanced by the call.
  void sample(std::string_view word, double alpha, int64_t nbest_size, uint64_t& rng,
              std::vector<TokenSpan>& out) const;

  // -- training --------------------------------------------------------------------------
  // Adds weight * P(piece used at each edge | word) to expected[id]; returns log Z(word).
  double expected_counts(std::string_view word, double weight, std::vector<double>& expected) const;
  // Viterbi piece ids of word (no unknown merging), never using piece `exclude` (-1: none).
  // False if no segmentation avoids it.
  bool viterbi_ids(std::string_view word, int64_t exclude, std::vector<uint32_t>& ids) const;

  std::size_t size() const { return scores_.size(); }
  double score(uint32_t id) const { return scores_[id]; }
  const std::string& piece(uint32_t id) const { return pieces_[id]; }

 private:
  struct Edge {
    uint32_t start;  // characters
    uint32_t end;
    uint32_t id;
    double score;
  };
  // Edges in order of start, then length; chars gets the byte offset of each character (and
  // the end). Throws if a character has no piece and there is no unk.
  void lattice(std::string_view word, std::vector<uint32_t>& chars, std::vector<Edge>& edges) const;
  // The byte offset of each character of word, and the end.
  static void char_starts(std::string_view word, std::vector<uint32_t>& chars);
  // edge(start, end, id, score) for each edge of the lattice, in lattice() order.
  template <typename Fn>
  void walk(std::string_view word, Fn&& edge) const;
  // The Viterbi path, as best_path over lattice() with no piece excluded, appended to out
  // (spans in characters; unknowns not yet merged: finish). True if it holds the unknown.
  template <typename Sum>
  bool viterbi(std::string_view word, std::vector<TokenSpan>& out) const;
  // The Viterbi path over a word of n characters, never using piece `exclude`; false if none.
  template <typename Sum>
  bool best_path(const std::vector<Edge>& edges, std::size_t n, int64_t exclude,
                 std::vector<Edge>& path) const;
  // forward[i]: log of the summed exp(scale * score) of every segmentation of the first i
  // characters.
  static std::vector<double> forward_mass(const std::vector<Edge>& edges, std::size_t len,
                                          double scale);
  // out's tokens from `first` on as the model gives them: consecutive unknowns as one, and
  // with byte fallback an unknown spelled in byte tokens where each of its bytes has one.
  void finish(std::string_view word, std::size_t first, std::vector<TokenSpan>& out) const;
  // The same for a path of edges, appended to out.
  void finish(std::string_view word, const std::vector<Edge>& path,
              std::vector<TokenSpan>& out) const;

  std::vector<std::string> pieces_;
  std::vector<double> scores_;
  // The matchable pieces' trie, by bytes, as a double array (place_units): unit 0 is the
  // root. A lattice walks it from each character, one array read a byte (a map of whole pieces
  // and their prefixes hashed the growing substring again at every character).
  struct Unit {
    uint32_t base;   // the children's units are base ^ byte
    uint32_t check;  // the parent's unit (a free unit: ~0)
    uint32_t piece;  // the piece that ends here, or kPrefixOnly
  };
  std::vector<Unit> units_;
  // Builds units_ from the matchable pieces and their ids (sorted here).
  void place_units(std::vector<std::pair<std::string_view, uint32_t>>& keys);
  std::size_t max_chars_ = 1;
  double unk_score_ = 0.0;
  UnigramOptions options_;
  int64_t byte_ids_[256];
};

// -- training helpers (unigram_trainer.cc) ------------------------------------------------

// Seed pieces: every character, then the substrings of the words (up to max_chars characters,
// no word boundary inside, "▁" only first, all other characters of one script class, combining
// marks (class 2) joining any) that the
// words' suffix array shows to repeat, ranked by count * length; at most seed_size of them.
// scripts: code point -> script class (a character missing from it is a class of its own).
// Returns the pieces and their initial weights: a character's count, a substring's
// count * length.
void seed_pieces(const std::vector<std::string>& words, const std::vector<uint64_t>& counts,
                 std::size_t max_chars, std::size_t seed_size,
                 const std::unordered_map<uint32_t, uint32_t>& scripts,
                 std::vector<std::string>& pieces, std::vector<double>& freqs);

// E-step over weighted words: expected count of each piece and the sum of weight * log Z.
double e_step(const UnigramModel& model, const std::vector<std::string>& words,
              const std::vector<uint64_t>& counts, std::size_t threads,
              std::vector<double>& expected);

// The loss in corpus likelihood if each piece were removed (sentencepiece's pruning): +inf for
// a piece that must stay (a single character, or one with no other segmentation), -inf for one
// no Viterbi segmentation uses.
std::vector<double> prune_losses(const UnigramModel& model, const std::vector<std::string>& words,
                                 const std::vector<uint64_t>& counts, std::size_t threads);

// The M-step: new log probabilities from expected counts, with sentencepiece's Bayesian
// (variational) estimate digamma(count) - digamma(total) instead of log(count / total), which
// pulls rare pieces down further. A piece expected fewer than `threshold` times gets NaN (drop
// it) unless keep[i] is set (the single characters).
std::vector<double> m_step(const std::vector<double>& expected, const std::vector<uint8_t>& keep,
                           double threshold);

// digamma(x) for x > 0.
double digamma(double x);

}  // namespace tokenmill
