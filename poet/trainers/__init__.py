"""Trainers: the protocol, the built-in ones (a plain dict registry), and `module:Class` loading."""

from __future__ import annotations

from typing import Any

from poet.plugins import import_named
from poet.trainers.base import ErrorPolicy, EvaluationFailed, Trainer, TrainerContext, TrainStep, TrainTask, propose
from poet.trainers.es import ESOptions, ESTrainer
from poet.trainers.ppo import PPOOptions, PPOTrainer

TRAINERS: dict[str, type] = {"es": ESTrainer, "ppo": PPOTrainer}


def resolve_trainer(name: str) -> type:
    """A trainer class by registered name or `package.module:ClassName`."""
    if name in TRAINERS:
        return TRAINERS[name]
    if ":" not in name:
        raise ValueError(f"unknown trainer {name!r}; registered: {', '.join(sorted(TRAINERS))}, or give module:Class")
    cls: Any = import_named(name, "trainer")
    missing = [m for m in ("init_state", "reset_state", "step") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(f"trainer {name!r} does not implement the Trainer protocol (missing {', '.join(missing)})")
    return cls


__all__ = [
    "ESOptions",
    "ESTrainer",
    "ErrorPolicy",
    "EvaluationFailed",
    "PPOOptions",
    "PPOTrainer",
    "TRAINERS",
    "TrainStep",
    "TrainTask",
    "Trainer",
    "TrainerContext",
    "propose",
    "resolve_trainer",
]
