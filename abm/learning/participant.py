"""A participant: an id, private data, a local model and optimizer, and its own random streams.

Protocols read a participant's data only inside the participant's own round logic; what leaves
it goes through :class:`abm.learning.messages.Message`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn

from abm.learning.data import Dataset
from abm.learning.partition import ParticipantData
from abm.learning.training import (
    ExtraLoss,
    LossWatch,
    TrainConfig,
    accuracy,
    make_optimizer,
    train_epochs,
)


@dataclass
class Participant:
    """One institution taking part in a protocol."""

    pid: int
    data: ParticipantData
    model: nn.Module
    train_config: TrainConfig
    seed: int
    eval_data: Dataset | None = None  # what the score is measured on (own test or global test)
    optimizer: torch.optim.Optimizer = field(init=False)
    generator: torch.Generator = field(init=False)
    rng: np.random.Generator = field(init=False)
    losses: LossWatch = field(init=False)  # its training losses that were not finite, until taken

    def __post_init__(self) -> None:
        self.losses = LossWatch()
        self.optimizer = make_optimizer(self.model.parameters(), self.train_config)
        self.generator = torch.Generator().manual_seed(self.seed)
        self.rng = np.random.default_rng(self.seed)

    @property
    def n_train(self) -> int:
        """Number of private training samples."""
        return len(self.data.train)

    def train(self, epochs: int, extra_loss: ExtraLoss | None = None) -> float:
        """Local cross-entropy epochs on private training data."""
        return train_epochs(
            self.model,
            self.optimizer,
            self.data.train,
            epochs,
            self.train_config.batch_size,
            self.generator,
            extra_loss,
            self.losses,
        )

    def score(self) -> float:
        """Accuracy on the evaluation data."""
        return accuracy(self.model, self.eval_data if self.eval_data is not None else self.data.test)
