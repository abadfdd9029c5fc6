"""Trainers: the protocol, the built-in ones (a plain dict registry), and `module:Class` loading."""
from __future__ import annotations

import importlib
import os
import sys
from typing import Any

from poet.trainers.base import (
    ErrorPolicy, EvaluationFailed, Trainer, TrainerContext, TrainStep, TrainTask, propose,
)
from poet.trainers.es import ESOptions, ESTrainer
from poet.trainers.ppo import PPOOptions, PPOTrainer

TRAINERS: dict[str, type] = {"es": ESTrainer, "ppo": PPOTrainer}


def resolve_trainer(name: str) -> type:
    """A trainer class by registered name or `package.module:ClassName`."""
    if name in TRAINERS:
        return TRAINERS[name]
    if ":" not in name:
        raise ValueError(f"unknown trainer {name!r}; registered: {', '.join(sorted(TRAINERS))}, or give module:Class")
    module_name, _, attr = name.partition(":")
    if os.getcwd() not in sys.path and "" not in sys.path:
        # as `python -m` does: the console script `poet` should find modules of the directory it runs in
        sys.path.append(os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import trainer module {module_name!r}: {exc}") from None
    cls: Any = getattr(module, attr, None)
    if cls is None:
        raise ValueError(f"module {module_name!r} has no trainer class {attr!r}")
    missing = [m for m in ("init_state", "reset_state", "step") if not callable(getattr(cls, m, None))]
    if missing:
        raise ValueError(f"trainer {name!r} does not implement the Trainer protocol (missing {', '.join(missing)})")
    return cls


__all__ = [
    "ESOptions", "ESTrainer", "ErrorPolicy", "EvaluationFailed", "PPOOptions", "PPOTrainer", "TRAINERS", "TrainStep", "TrainTask",
    "Trainer", "TrainerContext", "propose", "resolve_trainer",
]
