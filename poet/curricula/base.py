"""The Curriculum protocol: what a run does each iteration, and how its set of envs grows.

A curriculum is a small object with a `name`, `start(ctx)` (the run's first state: its
first envs and agents) and `run_iteration(ctx, iteration, phase)`. It reads and changes
only `ctx.state` (a `poet.state.RunState`, which checkpoints save and load whole) and uses
the services of `ctx` (trainer, evaluator, scorer, records, seeds). `phase(name)` is a
context manager that times a phase and counts its env steps into the run's `phases`
table; every evaluation a phase makes should go to the evaluator in as few waves as it can.

A user's curriculum is named in config as `curriculum: package.module:Class`. A curriculum
with options declares them as a dataclass `Options` (with an optional `check()` returning
(field, problem) pairs, like a trainer's): `curriculum_options` is built into it, checked
like the rest of the config (errors name `curriculum_options.<field>` and the bound), and
the class is built as `Class(options)`. A curriculum without `Options` takes none: `Class()`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from poet.context import RunContext

PhaseTimer = Callable[[str], AbstractContextManager]


@runtime_checkable
class Curriculum(Protocol):
    """Decides which agents train on which envs, and how the envs change."""

    name: str

    def start(self, ctx: RunContext) -> None:
        """Create the run's first envs and agents in `ctx.state`."""
        ...

    def run_iteration(self, ctx: RunContext, iteration: int, phase: PhaseTimer) -> None:
        """One iteration: its phases, each inside `with phase("name"):`."""
        ...


# Optional: `progress_fields(ctx) -> dict | None`, what the progress bar shows after an iteration
# (None or absent: active pairs, the best score, envs solved), and `outcome(state) -> str`, how
# the run ended, for its closing line (absent: the number of envs solved besides the first).
#
# Optional: `report_traits() -> dict`, what the curriculum's runs record, written to run.json for the
# report (`poet.analysis.report.traits`; absent: the report reads it from the tables):
#   {"kind": "population"}: pairs made by reproduction, with transfers ("annecs_reference": True
#       when admitted events carry the reference code's ANNECS count);
#   {"kind": "level_buffer", "buffer_size": N, "min_fill": f, "edits": bool}: one agent
#       replaying levels from a buffer (explored / edited / replayed events);
#   {"kind": "single"}: one agent on envs the curriculum picks.
