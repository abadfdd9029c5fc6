"""The `cnn` kind: a stack of convolutions over the observation, then fully connected layers.

An observation of shape (H, W, C) is an image with its channels last (gymnasium's and dcd's
maze view, 5 x 5 x 3); (H, W) is an image of one channel; a flat (L,) observation is read
by 1-D convolutions. Convolutions have stride 1 and no padding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch
from torch import nn

from poet.config import out_of_range

ACTIVATIONS = {"relu": nn.ReLU, "tanh": nn.Tanh}


@dataclass
class CNNOptions:
    """The `cnn` kind's options (defaults: dcd's maze agent's encoder, one 16-filter 3 x 3 layer)."""

    channels: list[int] = field(default_factory=lambda: [16])  # output channels of each convolution
    kernel: int = 3  # the convolutions' kernel size (square for images)
    hidden: list[int] = field(default_factory=lambda: [32])  # fully connected layers after the convolutions
    activation: Literal["relu", "tanh"] = "relu"

    def check(self) -> list[tuple[str, str]]:
        """(field, problem) for every impossible value."""
        return [
            *out_of_range(
                self, ["channels"], lambda v: len(v) > 0 and min(v) >= 1, "at least one layer, all sizes >= 1"
            ),
            *out_of_range(self, ["kernel"], lambda v: v >= 1, ">= 1"),
            *out_of_range(self, ["hidden"], lambda v: not v or min(v) >= 1, "sizes >= 1"),
        ]


def mlp_layers(sizes: list[int], activation: str, last_activation: bool) -> list[nn.Module]:
    """Linear layers between consecutive `sizes`, the activation after each (but the last, unless asked)."""
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2 or last_activation:
            layers.append(ACTIVATIONS[activation]())
    return layers


class ConvEncoder(nn.Module):
    """Convolutions over one observation shape, flattened: `out_size` features per row."""

    def __init__(self, obs_shape: tuple[int, ...], channels: list[int], kernel: int, activation: str):
        super().__init__()
        if len(obs_shape) not in (1, 2, 3):
            raise ValueError(f"kernel: a cnn reads observations of 1 to 3 dimensions, got shape {obs_shape}")
        self.obs_shape = tuple(obs_shape)
        self.image = len(obs_shape) >= 2
        spatial = list(obs_shape[:2]) if self.image else [obs_shape[0]]
        if min(spatial) < kernel * len(channels) - (len(channels) - 1):
            raise ValueError(
                f"kernel: {len(channels)} convolutions of kernel {kernel} need observations of at least "
                f"{kernel * len(channels) - len(channels) + 1} per side, got shape {tuple(obs_shape)}"
            )
        conv = nn.Conv2d if self.image else nn.Conv1d
        in_channels = obs_shape[2] if len(obs_shape) == 3 else 1
        layers: list[nn.Module] = []
        for out_channels in channels:
            layers += [conv(in_channels, out_channels, kernel), ACTIVATIONS[activation]()]
            in_channels = out_channels
            spatial = [s - kernel + 1 for s in spatial]
        self.net = nn.Sequential(*layers, nn.Flatten())
        self.out_size = in_channels * math.prod(spatial)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Features of a batch of observations (B, *obs_shape)."""
        if len(self.obs_shape) == 3:
            x = obs.permute(0, 3, 1, 2)  # channels last -> channels first
        else:
            x = obs.unsqueeze(1)
        return self.net(x)


class CNNPolicy(nn.Module):
    """Convolutions, then fully connected layers, then the outputs (feed-forward)."""

    Options = CNNOptions
    state_size = 0

    def __init__(self, obs_shape: tuple[int, ...], n_outputs: int, options: CNNOptions):
        super().__init__()
        self.encoder = ConvEncoder(obs_shape, options.channels, options.kernel, options.activation)
        self.head = nn.Sequential(
            *mlp_layers([self.encoder.out_size, *options.hidden, n_outputs], options.activation, False)
        )

    def forward(self, obs: torch.Tensor, state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Outputs for a batch; the (empty) state passes through."""
        return self.head(self.encoder(obs)), state
