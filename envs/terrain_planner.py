"""A privileged planner for the terrain runner: what its physics allows, measured, not assumed.

The planner sees the whole course and steps the same compiled core the agents are scored
with (`terrain_core.step_row`), so what it clears is clearable by some action sequence of
an agent. It drives at full power on every step and, on every step it stands on the
ground, tries each jump strength of `JUMP_STRENGTHS` (0: no jump); a beam of the `beam`
furthest distinct states goes on to the next step. A course is cleared when a state crosses
the finish line within the episode's step cap. Being a search, it can miss a way through
(a too narrow beam); it never clears a course no action sequence clears.

`limit` measures the runner's physical limit for one obstacle kind by bisection: the
smallest pit width or stump height (on level ground, as POET's generator places them) that
the planner does not clear on any of the given course seeds. The family's units are chosen
from these limits (`envs.terrain`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numba
import numpy as np

from envs import terrain_core
from envs.terrain_core import RES, VX, VY, X, Y

JUMP_STRENGTHS = (0.0, 0.5, 1.0)
BEAM = 1024
# At full drive a runner that is not blocked moves on, so a search whose furthest state has
# not moved on for this many steps (10 s) is stuck for good.
PATIENCE = 200


@numba.njit(cache=True)
def _search(
    table: np.ndarray, max_cell: int, course_length: float, max_steps: int, strengths: np.ndarray, beam: int
) -> tuple[bool, float, int]:
    """Beam search on one course; returns (cleared, furthest x reached, steps taken)."""
    n_kids = beam * strengths.size
    state = np.zeros((beam, 4))
    grounded = np.zeros(beam, dtype=np.bool_)
    cells = np.zeros(beam, dtype=np.int64)
    grounded[0] = True
    alive = 1
    kid_state = np.empty((n_kids, 4))
    kid_grounded = np.empty(n_kids, dtype=np.bool_)
    kid_cells = np.empty(n_kids, dtype=np.int64)
    best_x, best_step = 0.0, 0
    for step in range(max_steps):
        n = 0
        for m in range(alive):
            choices = strengths.size if grounded[m] else 1
            for c in range(choices):
                kid_state[n] = state[m]
                a1 = strengths[c] if grounded[m] else 0.0
                _, fell, finished, cell, contact = terrain_core.step_row(
                    table, 0, max_cell, course_length, 1.0, 1.0, a1, kid_state[n], grounded[m], cells[m]
                )
                if finished:
                    return True, course_length, step + 1
                if fell:
                    continue
                kid_grounded[n], kid_cells[n] = contact, cell
                n += 1
        if n == 0:
            return False, best_x, step + 1
        order = np.argsort(-kid_state[:n, X], kind="mergesort")
        alive = 0
        for i in order:
            duplicate = False
            for j in range(alive - 1, -1, -1):  # kept states are sorted by x: look back while x is equal
                if state[j, X] - kid_state[i, X] > 1e-9:
                    break
                if (
                    grounded[j] == kid_grounded[i]
                    and abs(state[j, Y] - kid_state[i, Y]) < 1e-9
                    and abs(state[j, VX] - kid_state[i, VX]) < 1e-9
                    and abs(state[j, VY] - kid_state[i, VY]) < 1e-9
                ):
                    duplicate = True
                    break
            if duplicate:
                continue
            state[alive] = kid_state[i]
            grounded[alive], cells[alive] = kid_grounded[i], kid_cells[i]
            alive += 1
            if alive == beam:
                break
        if state[0, X] > best_x:
            best_x, best_step = state[0, X], step
        elif step - best_step >= PATIENCE:
            return False, best_x, step + 1
    return False, best_x, max_steps


def plan(course, max_steps: int, beam: int = BEAM, strengths: Sequence[float] = JUMP_STRENGTHS) -> tuple[bool, float]:
    """Search one `envs.terrain.Course`: (cleared within `max_steps`, furthest x reached in metres)."""
    cleared, best_x, _ = _search(
        np.ascontiguousarray(course.table),
        course.n_cells - 1 - terrain_core.MAX_LOOKAHEAD,
        float(course.course_length),
        int(max_steps),
        np.asarray(strengths, dtype=np.float64),
        int(beam),
    )
    return bool(cleared), float(best_x)


def limit(clears: Callable[[float], bool], lo: float, hi: float, resolution: float = RES) -> float:
    """The smallest size in [lo, hi] (to `resolution`) that `clears(size)` rejects, by bisection;
    `clears(lo)` must hold and `clears(hi)` must not."""
    if not clears(lo):
        raise ValueError(f"the planner does not clear the smallest size {lo}")
    if clears(hi):
        raise ValueError(f"the planner clears the largest size {hi}")
    while hi - lo > resolution * (1 + 1e-9):
        mid = round((lo + hi) / 2 / resolution) * resolution
        if mid <= lo or mid >= hi:
            break
        if clears(mid):
            lo = mid
        else:
            hi = mid
    return hi
