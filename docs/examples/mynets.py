"""Your own network as a policy kind: a GRU policy, named in a run's config as
`policy.kind: mynets:GRUPolicy` (this file on the Python path as `mynets`).

Nothing in `poet/` knows this module: the run imports it by name, in the driver and on
every worker, and stores only the kind's name, its options and the flat weights.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn


@dataclass
class GRUOptions:
    """The kind's options (`policy.options`); each is typed and has a default."""

    hidden: int = 32  # GRU units

    def check(self) -> list[tuple[str, str]]:
        """(option, problem) for impossible values, each a ConfigError before the run starts."""
        return [("hidden", f"must be >= 1, got {self.hidden}")] if self.hidden < 1 else []


class GRUPolicy(nn.Module):
    """A GRU cell over the flattened observation, then a linear layer to the outputs."""

    Options = GRUOptions

    def __init__(self, obs_shape: tuple[int, ...], n_outputs: int, options: GRUOptions):
        super().__init__()
        self.cell = nn.GRUCell(math.prod(obs_shape), options.hidden)
        self.out = nn.Linear(options.hidden, n_outputs)
        self.state_size = options.hidden  # floats of recurrent state per episode; 0: feed-forward

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs (pre-squash actions, or logits) and next states for a batch of rows."""
        h = self.cell(obs.flatten(1), state)
        return self.out(h), h
