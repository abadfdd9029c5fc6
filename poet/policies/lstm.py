"""The `lstm` kind: optional fully connected layers, an LSTM cell, then a head to the outputs.

The state of a row is the cell's hidden and cell vectors side by side (2 x `hidden` floats),
zero at every episode start. Defaults are the recurrent core of dcd's maze agent (an
LSTM of 256 units, then a 32-unit tanh layer before the outputs).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn
from torch.nn import functional as F

from poet.config import out_of_range
from poet.policies.cnn import mlp_layers


@dataclass
class LSTMOptions:
    """The `lstm` kind's options."""

    hidden: int = 256  # LSTM units
    encoder: list[int] = field(default_factory=list)  # fully connected layers before the LSTM
    head: list[int] = field(default_factory=lambda: [32])  # fully connected layers after it
    activation: Literal["tanh", "relu"] = "tanh"  # of the encoder's and the head's layers

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(self, ["hidden"], lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ["encoder", "head"], lambda v: not v or min(v) >= 1, "sizes >= 1"),
        ]


class LSTMCell(nn.Module):
    """torch's LSTM cell (the same parameters, gates in the order i, f, g, o, and numbers up to
    round-off) written with linear layers, so that torch.func can batch it over many rows'
    weights (it has no batching rule for `nn.LSTMCell`)."""

    def __init__(self, in_size: int, hidden: int):
        super().__init__()
        self.weight_ih = nn.Parameter(torch.empty(4 * hidden, in_size))
        self.weight_hh = nn.Parameter(torch.empty(4 * hidden, hidden))
        self.bias_ih = nn.Parameter(torch.empty(4 * hidden))
        self.bias_hh = nn.Parameter(torch.empty(4 * hidden))
        bound = 1.0 / hidden**0.5
        for p in self.parameters():
            nn.init.uniform_(p, -bound, bound)

    def forward(self, x: torch.Tensor, state: tuple[torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """The next (h, c) for inputs `x` and states (h, c)."""
        h, c = state
        gates = F.linear(x, self.weight_ih, self.bias_ih) + F.linear(h, self.weight_hh, self.bias_hh)
        i, f, g, o = gates.chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        return torch.sigmoid(o) * torch.tanh(c), c


class RecurrentCore(nn.Module):
    """An LSTM cell over `in_size` features, then a head to `n_outputs`; the state is [h, c]."""

    def __init__(self, in_size: int, hidden: int, head: list[int], activation: str, n_outputs: int):
        super().__init__()
        self.hidden = hidden
        self.cell = LSTMCell(in_size, hidden)
        self.head = nn.Sequential(*mlp_layers([hidden, *head, n_outputs], activation, False))

    def forward(self, x: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs and the next state for features `x` and states `state` (B, 2 x hidden)."""
        h, c = self.cell(x, (state[:, : self.hidden], state[:, self.hidden :]))
        return self.head(h), torch.cat([h, c], dim=1)


class LSTMPolicy(nn.Module):
    """Fully connected layers (optional), an LSTM cell, a head (recurrent)."""

    Options = LSTMOptions

    def __init__(self, obs_shape: tuple[int, ...], n_outputs: int, options: LSTMOptions):
        super().__init__()
        size = 1
        for s in obs_shape:
            size *= int(s)
        self.encoder = nn.Sequential(
            nn.Flatten(), *mlp_layers([size, *options.encoder], options.activation, True) if options.encoder else []
        )
        width = options.encoder[-1] if options.encoder else size
        self.core = RecurrentCore(width, options.hidden, options.head, options.activation, n_outputs)
        self.state_size = 2 * options.hidden

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs and next states for a batch."""
        return self.core(self.encoder(obs), state)
