"""The terrain runner's physics: its constants and the compiled kernels that step it.

Each row is one episode on its own course, stepped by plain scalar code compiled with numba
(`cache=True`: the compile is paid once per machine, then loaded from `__pycache__`). The
per-row arithmetic is written in the same order as the numpy core it replaced, and numba
neither reassociates nor fuses floating-point operations unless told to (no `fastmath`), so a
row's numbers are those of the numpy core bit for bit (tests/test_terrain_core.py).

The constants live here, beside the kernels, because numba freezes module globals into the
compiled code and its cache is keyed on this file: a constant changed anywhere else would
leave a stale compiled kernel behind.
"""

from __future__ import annotations

import numba
import numpy as np

from envs.kernel import row_reset, row_step

# ---- course geometry (metres) ----
RES = 0.1  # grid resolution of the course arrays
NO_GROUND = -1000.0  # height stored in pit cells: far below anything, so walls never trigger there

# ---- physics ----
DT = 0.05
DRIVE = 12.0  # ground acceleration per unit of a0; with DRAG the top speed is DRIVE / DRAG = 8 m/s
DRAG = 1.5
SLOPE_GRAVITY = 9.8  # full g along the slope: slopes steeper than DRIVE / 9.8 = 1.22 need momentum or hops
AIR_CONTROL = 2.0
AIR_DRAG = AIR_CONTROL / (DRIVE / DRAG)  # same top speed in the air, so hopping cannot outrun running
GRAVITY = 15.0
JUMP_SPEED = 6.0  # apex 6^2 / (2*15) = 1.2 m, air time 0.8 s
WALL = 0.25  # a step up taller than this blocks the runner
MAX_DROP = 0.3  # a step down deeper than this makes the runner airborne
FALL_DEPTH = 0.5  # this far below the rim of a pit the runner has fallen
FALL_REWARD = -100.0
PROGRESS_REWARD = 300.0
ACTION_COST = 0.01

# ---- observation ----
# 5 state entries + 17 look-ahead samples at 0.5, 1.0, ..., 8.5 m = 22 (further than the
# longest possible jump, about 6.7 m).
LIDAR_CELLS = np.arange(5, 90, 5, dtype=np.int64)
N_STATE = 5
OBS_DIM = N_STATE + LIDAR_CELLS.size
OBS_LIMIT = 5.0

# Columns of a course's table (one row per cell).
H, SLOPE, PIT, KILL = range(4)
# Columns of the per-row state; the row kernel's state adds two.
X, Y, VX, VY = range(4)
GROUNDED, CELL = 4, 5  # 1.0 / 0.0, and the cell under the runner (a whole number)
KERNEL_STATE = 6

_INV_RES = 1.0 / RES
_FALL_STEP = DT * GRAVITY
_HALF_FALL_STEP = 0.5 * DT * GRAVITY
_VX_SCALE, _VY_SCALE = 1.0 / 8.0, 1.0 / 6.0
_LIDAR_FIRST, _LIDAR_STRIDE, _LIDAR_N = int(LIDAR_CELLS[0]), int(LIDAR_CELLS[1] - LIDAR_CELLS[0]), int(LIDAR_CELLS.size)
MAX_LOOKAHEAD = int(LIDAR_CELLS[-1])


@numba.njit(cache=True, inline="always")
def _clip(v: float, lo: float, hi: float) -> float:
    # NaN stays NaN, as np.minimum(np.maximum(v, lo), hi) keeps it
    if v < lo:
        return lo
    if v > hi:
        return hi
    return v


@numba.njit(cache=True, inline="always")
def _cell_of(x: float, max_cell: int) -> int:
    # x >= 0 after a move that is not blocked, so truncation is floor; a NaN position (from a
    # NaN action) reads cell 0 rather than indexing outside the course
    if not x >= 0.0:
        return 0
    c = int(x * _INV_RES)
    return c if c < max_cell else max_cell


@numba.njit(cache=True)
def observe_row(table: np.ndarray, base: int, state: np.ndarray, grounded: bool, cell: int, obs: np.ndarray) -> None:
    """Write one row's observation (OBS_DIM float32) into `obs`: its state, then how far the
    ground ahead lies below or above it (pit cells hold NO_GROUND, so they read -1)."""
    here = base + cell
    y = state[Y]
    obs[0] = _clip(state[VX] * _VX_SCALE, -OBS_LIMIT, OBS_LIMIT)
    obs[1] = _clip(state[VY] * _VY_SCALE, -OBS_LIMIT, OBS_LIMIT)
    obs[2] = 1.0 if grounded else 0.0
    obs[3] = _clip((y - table[here, H]) * 0.5, -OBS_LIMIT, OBS_LIMIT)
    obs[4] = _clip(table[here, PIT], -OBS_LIMIT, OBS_LIMIT)
    for k in range(_LIDAR_N):
        obs[N_STATE + k] = _clip((table[here + _LIDAR_FIRST + k * _LIDAR_STRIDE, H] - y) * 0.5, -1.0, 1.0)


@numba.njit(cache=True)
def step_row(
    table: np.ndarray,
    base: int,
    max_cell: int,
    course_length: float,
    progress_scale: float,
    a0: float,
    a1: float,
    state: np.ndarray,
    grounded: bool,
    cell: int,
) -> tuple[float, bool, bool, int, bool]:
    """Advance one live row by DT in place of `state` (x, y, vx, vy); the course's cells start at
    `table[base]`. Actions are clipped to [-1, 1]. Returns (reward, fell, finished, new cell,
    new grounded)."""
    a0 = _clip(a0, -1.0, 1.0)
    a1 = _clip(a1, -1.0, 1.0)
    x, y, vx, vy = state[X], state[Y], state[VX], state[VY]

    # Velocities: drive with drag and slope on the ground, slight air control in the air.
    if grounded:
        vx = vx + DT * (DRIVE * a0 - DRAG * vx - SLOPE_GRAVITY * table[base + cell, SLOPE])
    else:
        vx = vx + DT * (AIR_CONTROL * a0 - AIR_DRAG * vx)
    jump = grounded and a1 > 0.0
    air = (not grounded) or jump
    # Exact ballistic update (constant gravity over the step), so the apex is exactly
    # JUMP_SPEED^2 / (2 GRAVITY) = 1.2 m and 1.6 m stumps stay out of reach.
    vy0 = JUMP_SPEED * a1 if jump else vy
    if air:
        vy = vy0 - _FALL_STEP
        y_new = y + DT * (vy0 - _HALF_FALL_STEP)
    else:
        vy = 0.0
        y_new = y

    # Horizontal move, blocked by walls (stump sides, steep bumps) and the start of the course.
    # The wall test uses the higher end of this step's vertical path: a runner that comes
    # down faster than WALL per step lands on a ledge it was above instead of bouncing off it.
    x_new = x + DT * vx
    new_cell = _cell_of(x_new, max_cell)
    top = y if y >= y_new else y_new
    if table[base + new_cell, H] > top + WALL or x_new < 0.0:
        x_new, vx, new_cell = x, 0.0, cell
    here = base + new_cell
    ground, over_pit = table[here, H], table[here, PIT] > 0.5

    # Contact: follow the ground while running, land when coming down onto it.
    follow = grounded and not jump and not over_pit and y - ground < MAX_DROP
    land = air and vy <= 0.0 and not over_pit and y_new <= ground
    contact = follow or land
    if contact:
        y_new, vy = ground, 0.0

    fell = y_new < table[here, KILL]
    finished = x_new >= course_length
    if fell:
        reward = FALL_REWARD
    else:
        reward = progress_scale * ((x_new if x_new < course_length else course_length) - x) - ACTION_COST * (
            a0 * a0 + a1 * a1
        )
    state[X], state[Y], state[VX], state[VY] = x_new, y_new, vx, vy
    return reward, fell, finished, new_cell, contact


@numba.njit(cache=True)
def reset_rows(
    table: np.ndarray,
    bases: np.ndarray,
    state: np.ndarray,
    grounded: np.ndarray,
    done: np.ndarray,
    cells: np.ndarray,
    obs: np.ndarray,
) -> None:
    """Put every row at x = 0, standing on the start pad, and write its observation."""
    for r in range(bases.size):
        state[r, :] = 0.0
        grounded[r], done[r], cells[r] = True, False, 0
        observe_row(table, bases[r], state[r], True, 0, obs[r])


@numba.njit(cache=True)
def step_rows(
    table: np.ndarray,
    bases: np.ndarray,
    max_cell: int,
    course_length: float,
    progress_scale: float,
    truncate: bool,
    actions: np.ndarray,
    state: np.ndarray,
    grounded: np.ndarray,
    done: np.ndarray,
    cells: np.ndarray,
    last_obs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One DT step of every row that is not done; returns new (observations float32, rewards
    float64, terminated, truncated) arrays.

    Rows that are already done keep their state and their observation (`last_obs`) and report
    zero reward and no end. `truncate`: this step reaches the step cap, so every live row that
    does not terminate is truncated.
    """
    n = bases.size
    obs = np.empty((n, OBS_DIM), dtype=np.float32)
    rewards = np.zeros(n)
    terminated = np.zeros(n, dtype=np.bool_)
    truncated = np.zeros(n, dtype=np.bool_)
    for r in range(n):
        if done[r]:
            obs[r] = last_obs[r]
            continue
        reward, fell, finished, cell, contact = step_row(
            table,
            bases[r],
            max_cell,
            course_length,
            progress_scale,
            np.float64(actions[r, 0]),
            np.float64(actions[r, 1]),
            state[r],
            grounded[r],
            cells[r],
        )
        cells[r], grounded[r] = cell, contact
        rewards[r] = reward
        terminated[r] = fell or finished
        truncated[r] = truncate and not terminated[r]
        done[r] = terminated[r] or truncated[r]
        observe_row(table, bases[r], state[r], contact, cell, obs[r])
    return obs, rewards, terminated, truncated


# ---- the row kernel (envs.kernel): data = (courses end to end, each row's first cell then
# the last cell a runner can stand on, [course_length, reward per metre]); the state is
# step_row's four entries (it reads no more of the array it is given), GROUNDED and CELL
@row_reset
def kernel_reset(data, row, state, obs):
    """Row `row` at x = 0, standing on the start pad, and its observation."""
    table, ints, _ = data
    state[:] = 0.0
    state[GROUNDED] = 1.0
    observe_row(table, ints[row], state, True, 0, obs)


@row_step
def kernel_step(data, row, action, state, obs):
    """One step of row `row` (`step_row`, then `observe_row`); ends when it falls or finishes."""
    table, ints, floats = data
    base = ints[row]
    reward, fell, finished, cell, grounded = step_row(
        table,
        base,
        ints[ints.size - 1],
        floats[0],
        floats[1],
        np.float64(action[0]),
        np.float64(action[1]),
        state,
        state[GROUNDED] != 0.0,
        np.int64(state[CELL]),
    )
    state[GROUNDED] = 1.0 if grounded else 0.0
    state[CELL] = cell
    observe_row(table, base, state, grounded, cell, obs)
    return reward, fell or finished
