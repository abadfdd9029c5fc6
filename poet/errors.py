"""Exceptions the command line turns into one-line messages (kept free of heavy imports)."""

from __future__ import annotations

from pathlib import Path


class EvaluationFailed(RuntimeError):
    """An evaluation raised or gave non-finite values and the run is set to stop."""


class RunInterrupted(RuntimeError):
    """The run stopped on SIGINT/SIGTERM after checkpointing."""

    def __init__(self, iteration: int, run_dir: Path):
        self.iteration, self.run_dir = iteration, run_dir
        super().__init__(
            f"interrupted before iteration {iteration}; checkpoint saved; continue with: poet resume {run_dir}"
        )


class WaveInterrupted(RuntimeError):
    """A stop was requested (SIGINT/SIGTERM) while an evaluator was working: the work in
    progress is abandoned and the run goes back to its last completed iteration."""
