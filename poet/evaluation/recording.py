"""Recorded rollouts of a Gaussian MLP policy through a family's row kernel: what an
on-policy trainer (PPO) collects, every env stepped in one compiled call.

`KernelRecorder` keeps one env per level, with its episode carried across collections, and
records per step what the trainer learns from: the raw observation, the policy's mean
output, the value, the sampled output, the reward, whether the episode goes on, and the
value where a step cap cut an episode. Per step, inside the loop: the
normalised observation (float64 arithmetic rounded once to float32, as numpy computes it),
the policy's forward (`forward_row`), the sample `mean + sigma * noise` from a noise block
the caller drew, the squash to the action bounds, the family's `step`, and the tally. The
value net's outputs at the recorded steps follow in a second pass over them
(`_step_values`): the same numbers, without the two networks' weights competing for the
core's first-level cache at every step. Log-probabilities are left to the caller, one call
for the whole block.

Each env's episodes reset with seeds drawn one by one from that env's own generator,
`params.reset_seed(drawn)` as a gymnasium env is reset, so the numbers are a function of
the levels, the generators and the noise only. The courses of an env's coming episodes
are built a few at a time (first as many as episodes that run to the step cap, then
`ROWS_PER_BUILD`); a level pinned to one course reuses its row.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numba
import numpy as np

from envs import EnvParams
from envs.kernel import KERNEL_DATA, RESET_SIGNATURE, STEP_SIGNATURE, RowKernel, readonly
from poet.policies import PolicySpec, forward_row, pack_weights
from poet.policies.mlp import ACTIVATION_CODES, tanh32

# courses built per call of the family's `data` for an env whose episodes take fresh courses,
# once its first ones (as many as episodes that run to the step cap) are used up: a call has a
# fixed cost of its own, and an env's unused courses are kept for its next collection
ROWS_PER_BUILD = 16

_DONE, _NEEDS_ROWS, _NOT_FINITE = 0, 1, 2


@dataclass
class Recorded:
    """One collection of `steps` steps from each of `envs` envs (arrays indexed (step, env))."""

    obs: np.ndarray  # (T, N, obs_dim) float64: the observation each step acted on
    mean: np.ndarray  # (T, N, act_dim) float32: the policy's output
    values: np.ndarray  # (T, N) float32: the value net's output
    u: np.ndarray  # (T, N, act_dim) float32: the sampled output (the env got its squash)
    rewards: np.ndarray  # (T, N) float64
    continues: np.ndarray  # (T, N) float64: 1 where the episode goes on after the step
    cut: np.ndarray  # (T, N) bool: the episode was cut at the step cap here (not terminated)
    cut_values: np.ndarray  # (T, N) float32: the value net's output there
    last_obs: np.ndarray  # (N, obs_dim) float64: each env's observation after the last step
    last_values: np.ndarray  # (N,) float32: the value net's output there
    episode_returns: list[float]  # finished episodes, in order of (step, env)
    episode_lengths: list[int]
    episode_slots: list[int]  # the env each finished episode ran in


class KernelRecorder:
    """One env per level on a family's row kernel, its episodes carried across `collect` calls."""

    def __init__(
        self,
        kernel: RowKernel,
        spec: PolicySpec,
        value_spec: PolicySpec,
        levels: Sequence[EnvParams],
        max_steps: int,
        reset_streams: Sequence[np.random.Generator],
        fail: Callable[[int, str], Exception],
    ):
        if spec.action_kind != "box":
            raise ValueError("a recorded kernel rollout samples box actions only")
        self.kernel, self.spec, self.levels = kernel, spec, list(levels)
        self.max_steps, self.streams, self.fail = int(max_steps), list(reset_streams), fail
        n = len(self.levels)
        self.pinned = np.array([p.course_seed is not None for p in self.levels])
        self.data = _new_tables()  # every env's, so that one compiled call steps them all
        self.rows = np.zeros(n, dtype=np.int64)  # courses built for each env
        self.state = np.zeros((n, kernel.state_size))
        self.obs = np.zeros((n, kernel.obs_dim), dtype=np.float32)
        self.pos = np.zeros((n, 3), dtype=np.int64)  # per env: step reached, row, episode length
        self.ep_return = np.zeros(n)
        self._sizes = np.asarray(spec.layer_sizes, dtype=np.int64)
        self._value_sizes = np.asarray(value_spec.layer_sizes, dtype=np.int64)
        self.value_spec = value_spec
        self._activation = ACTIVATION_CODES[spec.activation]
        self._low = np.asarray(spec.action_low, dtype=np.float32)
        self._span = np.asarray(spec.action_high, dtype=np.float32) - self._low

    def _build(self, i: int, count: int) -> None:
        """Env i's next `count` courses (one, reused, for a pinned level), its row back to 0,
        its first episode started."""
        count = 1 if self.pinned[i] else count
        seeds = [self.levels[i].reset_seed(int(self.streams[i].integers(0, 2**31 - 1))) for _ in range(count)]
        data = self.kernel.batch_data([self.levels[i]] * count, seeds)
        _set_table(self.data, i, data)
        self.rows[i], self.pos[i, 1] = count, 0
        self.kernel.reset(data, 0, self.state[i], self.obs[i])

    def collect(
        self,
        actor: np.ndarray,
        value: np.ndarray,
        obs_mean: np.ndarray,
        obs_std: np.ndarray,
        sigma: np.ndarray,
        noise: np.ndarray,
    ) -> Recorded:
        """`noise.shape[0]` steps of every env with the policy `actor` and the value net `value`
        (flat weights on normalised observations (obs - obs_mean) / obs_std), sampling
        `mean + sigma * noise[t, env]`."""
        steps, n = noise.shape[0], len(self.levels)
        dim, act = self.kernel.obs_dim, self.spec.act_dim
        if noise.shape != (steps, n, act):
            raise ValueError(f"expected noise of shape ({steps}, {n}, {act}), got {noise.shape}")
        rec = Recorded(
            obs=np.empty((steps, n, dim)),
            mean=np.empty((steps, n, act), dtype=np.float32),
            values=np.empty((steps, n), dtype=np.float32),
            u=np.empty((steps, n, act), dtype=np.float32),
            rewards=np.empty((steps, n)),
            continues=np.ones((steps, n)),
            cut=np.zeros((steps, n), dtype=bool),
            cut_values=np.zeros((steps, n), dtype=np.float32),
            last_obs=np.empty((n, dim)),
            last_values=np.empty(n, dtype=np.float32),
            episode_returns=[],
            episode_lengths=[],
            episode_slots=[],
        )
        ended_return, ended_length = np.zeros((steps, n)), np.zeros((steps, n), dtype=np.int64)
        weights = pack_weights(self.spec, np.asarray(actor, dtype=np.float32)[None, :])[0]
        value_weights = pack_weights(self.value_spec, np.asarray(value, dtype=np.float32)[None, :])[0]
        policy = (weights, self._sizes, value_weights, self._value_sizes, self._activation, self._low, self._span)
        norm = (np.asarray(obs_mean, dtype=np.float64), np.asarray(obs_std, dtype=np.float64))
        sigma = np.ascontiguousarray(sigma, dtype=np.float32)
        noise = np.ascontiguousarray(noise, dtype=np.float32)
        arrays = (rec.obs, rec.mean, rec.values, rec.u, rec.rewards, rec.continues, rec.cut)
        arrays += (rec.cut_values, rec.last_values, ended_return, ended_length)
        k = self.kernel
        for i in range(len(self.data), n):  # a first collection: as many courses as episodes that run to the cap
            self._build(i, steps // self.max_steps + 1)
        self.pos[:, 0] = 0
        i = 0
        while True:
            i, status = _record(
                k.reset, k.step, self.data, k.obs_dim, k.state_size, i, self.state, self.obs, *policy, *norm,
                sigma, noise, self.pos, self.ep_return, self.pinned, self.rows, self.max_steps, *arrays,
            )  # fmt: skip
            if status == _DONE:
                break
            if status == _NOT_FINITE:
                t = int(self.pos[i, 0])
                raise self.fail(i, f"non-finite reward or observation (reward {rec.rewards[t, i]})")
            self._build(i, ROWS_PER_BUILD)  # its episode ended on its last built course
        rec.last_obs[:] = self.obs
        ends = np.argwhere(rec.continues == 0.0)  # (step, env) order, as a step-by-step loop finds them
        rec.episode_returns = [float(ended_return[t, i]) for t, i in ends]
        rec.episode_lengths = [int(ended_length[t, i]) for t, i in ends]
        rec.episode_slots = [int(i) for _, i in ends]
        return rec


@numba.njit(cache=True, error_model="numpy")
def _record_env(
    reset, step, data, obs_dim, state_size, state, obs, w, sizes, wv, value_sizes, activation, low, span, mean, std,
    sigma, noise, env, pos, ep_return, pinned, n_rows, max_steps,
    rec_obs, rec_mean, rec_values, rec_u, rewards, continues, cut, cut_values, last_values,
    ended_return, ended_length,
):  # fmt: skip
    """Env `env` from step pos[0] to the block's end: returns 0 there, 1 where an episode ended
    on the last built course (the caller builds more and resets), 2 at a non-finite reward or
    observation (that step recorded). The env's position and return so far are kept in place."""
    steps, act = noise.shape[0], noise.shape[2]
    width = max(sizes.max(), value_sizes.max())
    h, acc = np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32)
    z, v = np.empty(obs_dim, dtype=np.float32), np.empty(1, dtype=np.float32)
    out, action = np.empty(act, dtype=np.float32), np.empty(act, dtype=np.float32)
    t, row, length, total = pos[0], pos[1], pos[2], ep_return[0]
    half, one = np.float32(0.5), np.float32(1.0)
    status = 0
    while t < steps:
        for k in range(obs_dim):
            rec_obs[t, env, k] = obs[k]
            z[k] = np.float32((np.float64(obs[k]) - mean[k]) / std[k])
        h[:obs_dim] = z
        forward_row(w, sizes, activation, False, low, span, h, acc, out)
        for j in range(act):
            u = out[j] + sigma[j] * noise[t, env, j]
            rec_mean[t, env, j] = out[j]
            rec_u[t, env, j] = u
            action[j] = low[j] + (tanh32(u) + one) * half * span[j]
        reward, ended = step(data, row, action, state, obs)
        rewards[t, env] = reward
        finite = np.isfinite(reward)
        for k in range(obs_dim):
            finite = finite and np.isfinite(obs[k])
        if not finite:
            status = 2
            break
        total += reward
        length += 1
        t += 1
        if ended or length >= max_steps:
            continues[t - 1, env] = 0.0
            ended_return[t - 1, env] = total
            ended_length[t - 1, env] = length
            if not ended:
                cut[t - 1, env] = True
                for k in range(obs_dim):
                    h[k] = np.float32((np.float64(obs[k]) - mean[k]) / std[k])
                forward_row(wv, value_sizes, activation, False, low, span, h, acc, v)
                cut_values[t - 1, env] = v[0]
            total, length = 0.0, 0
            if pinned:
                reset(data, row, state, obs)
            elif row + 1 < n_rows:
                row += 1
                reset(data, row, state, obs)
            else:
                status = 1
                break
    if status == 0:  # the value of where the block leaves the env, to bootstrap from
        for k in range(obs_dim):
            h[k] = np.float32((np.float64(obs[k]) - mean[k]) / std[k])
        forward_row(wv, value_sizes, activation, False, low, span, h, acc, v)
        last_values[env] = v[0]
    pos[0], pos[1], pos[2], ep_return[0] = t, row, length, total
    return status


@numba.njit(cache=True, error_model="numpy")
def _step_values(rec_obs, mean, std, wv, value_sizes, activation, rec_values):
    """The value net's output at every recorded step, the observation normalised as the
    stepping loop normalises it: the same numbers as inside that loop, where the two
    networks' weights together overflow the core's first-level cache."""
    steps, n, obs_dim = rec_obs.shape
    width = value_sizes.max()
    h, acc = np.empty(width, dtype=np.float32), np.empty(width, dtype=np.float32)
    v, unused = np.empty(1, dtype=np.float32), np.empty(1, dtype=np.float32)
    for t in range(steps):
        for env in range(n):
            for k in range(obs_dim):
                h[k] = np.float32((rec_obs[t, env, k] - mean[k]) / std[k])
            forward_row(wv, value_sizes, activation, False, unused, unused, h, acc, v)
            rec_values[t, env] = v[0]


_f32, _f64, _i64, _b1 = numba.types.float32, numba.types.float64, numba.types.int64, numba.types.boolean
# one signature for every family (their functions are values of fixed types), so the loop is
# compiled once and then loaded from numba's cache, as `poet.evaluation.row_loop` does
_RECORD = numba.types.UniTuple(_i64, 2)(
    numba.types.FunctionType(RESET_SIGNATURE),
    numba.types.FunctionType(STEP_SIGNATURE),
    numba.types.ListType(KERNEL_DATA),  # data per env
    _i64,  # obs_dim
    _i64,  # state_size
    _i64,  # first env
    numba.types.Array(_f64, 2, "C"),  # state per env
    numba.types.Array(_f32, 2, "C"),  # obs per env
    readonly(_f32),  # packed weights
    readonly(_i64),  # layer sizes
    readonly(_f32),  # packed value weights
    readonly(_i64),  # value layer sizes
    _i64,  # activation
    readonly(_f32),  # action low
    readonly(_f32),  # action span
    readonly(_f64),  # obs mean
    readonly(_f64),  # obs std
    readonly(_f32),  # sigma
    readonly(_f32, 3),  # noise
    numba.types.Array(_i64, 2, "C"),  # pos per env: step reached, row, episode length
    _f64[::1],  # episode return so far per env
    readonly(_b1),  # pinned per env
    readonly(_i64),  # rows built per env
    _i64,  # max_steps
    numba.types.Array(_f64, 3, "C"),  # obs
    numba.types.Array(_f32, 3, "C"),  # mean
    numba.types.Array(_f32, 2, "C"),  # values
    numba.types.Array(_f32, 3, "C"),  # u
    numba.types.Array(_f64, 2, "C"),  # rewards
    numba.types.Array(_f64, 2, "C"),  # continues
    numba.types.Array(_b1, 2, "C"),  # cut
    numba.types.Array(_f32, 2, "C"),  # cut_values
    _f32[::1],  # last_values
    numba.types.Array(_f64, 2, "C"),  # ended return
    numba.types.Array(_i64, 2, "C"),  # ended length
)


@numba.njit(_RECORD, cache=True, error_model="numpy")
def _record(
    reset, step, data, obs_dim, state_size, first, state, obs, w, sizes, wv, value_sizes, activation, low, span,
    mean, std, sigma, noise, pos, ep_return, pinned, n_rows, max_steps,
    rec_obs, rec_mean, rec_values, rec_u, rewards, continues, cut, cut_values, last_values,
    ended_return, ended_length,
):  # fmt: skip
    """`_record_env` for every env from `first` on, in one call (converting the arguments,
    the family's functions above all, has a cost per call): (n, 0) when all are done, else
    (env, status) for the env that stopped."""
    for env in range(first, len(data)):
        status = _record_env(
            reset, step, data[env], obs_dim, state_size, state[env], obs[env], w, sizes, wv, value_sizes,
            activation, low, span, mean, std, sigma, noise, env, pos[env], ep_return[env:env + 1], pinned[env],
            n_rows[env], max_steps, rec_obs, rec_mean, rec_values, rec_u, rewards, continues, cut, cut_values,
            last_values, ended_return, ended_length,
        )  # fmt: skip
        if status != _DONE:
            return env, status
    _step_values(rec_obs, mean, std, wv, value_sizes, activation, rec_values)
    return len(data), _DONE


_TABLES = numba.types.ListType(KERNEL_DATA)


# the typed list's own methods compile on first use from Python, uncached: these are cached
@numba.njit(_TABLES(), cache=True)
def _new_tables():
    return numba.typed.List.empty_list(KERNEL_DATA)


@numba.njit(numba.types.void(_TABLES, _i64, KERNEL_DATA), cache=True)
def _set_table(tables, i, data):
    """Env i's data: replaced, or appended as the next env's."""
    if i < len(tables):
        tables[i] = data
    else:
        tables.append(data)
