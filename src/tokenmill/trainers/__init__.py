"""Trainers: frozen option dataclasses that learn a model from word counts."""

from tokenmill.trainers.bpe import BPETrainer, MergeStep, TrainResult
from tokenmill.trainers.unigram import UnigramTrainer, UnigramTrainResult
from tokenmill.trainers.wordpiece import WordPieceStep, WordPieceTrainer, WordPieceTrainResult

__all__ = ["BPETrainer", "MergeStep", "TrainResult", "UnigramTrainer", "UnigramTrainResult",
           "WordPieceStep", "WordPieceTrainer", "WordPieceTrainResult"]
