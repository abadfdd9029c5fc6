"""The `cnn_lstm` kind: convolutions, then an LSTM cell, then a head, as dcd's maze agent
(`models/multigrid_models.py`: a 16-filter 3 x 3 convolution, an LSTM of 256 units, a
32-unit tanh layer before the outputs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from poet.config import out_of_range
from poet.policies.cnn import ConvEncoder
from poet.policies.lstm import RecurrentCore


@dataclass
class CNNLSTMOptions:
    """The `cnn_lstm` kind's options."""

    channels: list[int] = field(default_factory=lambda: [16])  # output channels of each convolution
    kernel: int = 3  # the convolutions' kernel size
    conv_activation: Literal["relu", "tanh"] = "relu"
    hidden: int = 256  # LSTM units
    head: list[int] = field(default_factory=lambda: [32])  # fully connected layers after the LSTM
    activation: Literal["tanh", "relu"] = "tanh"  # of the head's layers

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(
                self, ["channels"], lambda v: len(v) > 0 and min(v) >= 1, "at least one layer, all sizes >= 1"
            ),
            *out_of_range(self, ["kernel", "hidden"], lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ["head"], lambda v: not v or min(v) >= 1, "sizes >= 1"),
        ]


class CNNLSTMPolicy(nn.Module):
    """Convolutions, an LSTM cell, a head (recurrent)."""

    Options = CNNLSTMOptions

    def __init__(self, obs_shape: tuple[int, ...], n_outputs: int, options: CNNLSTMOptions):
        super().__init__()
        self.encoder = ConvEncoder(obs_shape, options.channels, options.kernel, options.conv_activation)
        self.core = RecurrentCore(self.encoder.out_size, options.hidden, options.head, options.activation, n_outputs)
        self.state_size = 2 * options.hidden

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs and next states for a batch."""
        return self.core(self.encoder(obs), state)
