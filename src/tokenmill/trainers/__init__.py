"""Trainers: frozen option dataclasses that learn a model from word counts."""

from tokenmill.trainers.bpe import BPETrainer, MergeStep, TrainResult

__all__ = ["BPETrainer", "MergeStep", "TrainResult"]
