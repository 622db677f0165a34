"""tokenmill: train, run and evaluate subword tokenizers, with a C++ core."""

from tokenmill.added_tokens import AddedToken
from tokenmill.encoding import Encoding, Padding, Truncation
from tokenmill.errors import FormatError, InputError, TokenmillError
from tokenmill.loading import load
from tokenmill.models.bpe import BPE
from tokenmill.models.unigram import Unigram
from tokenmill.models.wordpiece import WordPiece
from tokenmill.normalized import NormalizedString
from tokenmill.tokenizer import Tokenizer
from tokenmill.trainers.bpe import BPETrainer, MergeStep, TrainResult
from tokenmill.trainers.unigram import UnigramTrainer, UnigramTrainResult
from tokenmill.trainers.wordpiece import WordPieceTrainer, WordPieceTrainResult

__all__ = [
    "AddedToken",
    "BPE",
    "BPETrainer",
    "Encoding",
    "FormatError",
    "InputError",
    "MergeStep",
    "NormalizedString",
    "Padding",
    "Tokenizer",
    "TokenmillError",
    "TrainResult",
    "Unigram",
    "UnigramTrainer",
    "UnigramTrainResult",
    "load",
    "Truncation",
    "WordPiece",
    "WordPieceTrainer",
    "WordPieceTrainResult",
]
