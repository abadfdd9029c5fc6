"""The in-process evaluator: order, request-only results, ES perturbations, policy refs, error
isolation, error policies, and the batched policy forward."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs
from envs import terrain_core
from envs.base import EnvParams
from envs.kernel import row_step
from poet.evaluation import EvalRequest, EvalResult, InProcessEvaluator, NoiseTable, Perturbation, RequestTableBuilder
from poet.evaluation.protocol import EvalError
from poet.evaluation.requests import RequestTable, simulated_steps
from poet.policies import BatchedPolicy, init_flat, spec_for_spaces
from poet.policies.mlp_torch import MLPPolicy, to_actions
from poet.seeding import episode_seeds
from poet.trainers import ErrorPolicy, EvaluationFailed
from tests.conftest import assert_torch_stays_unloaded, mutation_chain

NOISE_SIZE = 100_000


def _spec(family):
    env = family.make_env(family.initial())
    try:
        return spec_for_spaces(env.observation_space, env.action_space, (8, 8), "tanh")
    finally:
        env.close()


def _weights(spec, n: int, seed: int, scale: float = 0.7) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(scale * rng.standard_normal(spec.num_params)).astype(np.float32) for _ in range(n)]


@pytest.fixture(scope="module")
def terrain():
    family = envs.make_family("terrain", {"course_length": 20.0})
    return family, _spec(family)


@pytest.fixture(scope="module")
def cartpole():
    family = envs.make_family("cartpole")
    return family, _spec(family)


def _requests(family, spec, ev, seed: int, max_steps: Sequence[int]) -> list[EvalRequest]:
    refs = [ev.put(w) for w in _weights(spec, 4, seed)]
    env_list = [family.initial(), *mutation_chain(family, 3, seed)]
    reqs = []
    for i, cap in enumerate(max_steps):
        reqs.append(
            EvalRequest(
                refs[i % 4], env_list[(i * 3) % 4], episodes=1 + i % 3, seed=1000 + 7 * i, max_steps=cap, tag=f"req{i}"
            )
        )
    return reqs


def test_a_request_table_is_the_sequence_of_its_requests_however_it_is_built(terrain):
    """A table from `EvalRequest`s and one from a builder's columns hold the same requests, in
    order, and evaluate to the same bits; a chunk cut from a table keeps its requests."""
    family, spec = terrain
    ev = InProcessEvaluator(family, spec, NoiseTable(np.random.SeedSequence(3), 50_000))
    refs = [ev.put(w) for w in _weights(spec, 3, 8)]
    levels = [family.initial(), *mutation_chain(family, 2, 5)]
    pinned = levels[1].with_course_seed(77)
    builder = RequestTableBuilder()
    builder.add(refs[0], levels, [2, 0, 2], [5, 2**70, 6], 2, 40, [10, 20, 30], [0.1, -0.1, 0.05], tag="es")
    builder.add(refs[1], [pinned, levels[0]], [0, 1], [7, 8], 3, 50)  # no perturbation, no tag
    builder.add(refs[0], levels[:1], [0], [9], 1, 30, tag="score")  # a policy seen before: the same row
    wanted = [
        EvalRequest(refs[0], levels[2], 2, 5, 40, Perturbation(10, 0.1, 1), "es"),
        EvalRequest(refs[0], levels[0], 2, 2**70, 40, Perturbation(20, 0.1, -1), "es"),
        EvalRequest(refs[0], levels[2], 2, 6, 40, Perturbation(30, 0.05, 1), "es"),
        EvalRequest(refs[1], pinned, 3, 7, 50),
        EvalRequest(refs[1], levels[0], 3, 8, 50),
        EvalRequest(refs[0], levels[0], 1, 9, 30, tag="score"),
    ]
    table = builder.build()
    assert len(builder) == len(table) == 6 and table.keys == [refs[0].key, refs[1].key]
    assert list(table) == wanted and table[-1] == wanted[-1] and table[1:3] == wanted[1:3]
    assert list(RequestTable.of(wanted)) == wanted and RequestTable.of(table) is table
    with pytest.raises(IndexError):
        table[6]
    chunk = table.take([4, 0])
    assert list(chunk) == [wanted[4], wanted[0]]
    by_table, by_objects = ev.evaluate(table), ev.evaluate(wanted)
    assert all(_same(a, b) for a, b in zip(by_table, by_objects)) and len(by_table) == 6
    with pytest.raises(ValueError, match="read-only"):  # results share the wave's arrays: none may change them
        by_table[0].returns[0] = 0.0


def _same(a: EvalResult, b: EvalResult) -> bool:
    return a.ok and b.ok and a.returns.tobytes() == b.returns.tobytes() and a.lengths.tobytes() == b.lengths.tobytes()


def _check_request_only(family, spec, max_steps: Sequence[int]) -> list[EvalResult]:
    ev = InProcessEvaluator(family, spec)
    reqs = _requests(family, spec, ev, seed=3, max_steps=max_steps)
    together = ev.evaluate(reqs)
    assert len(together) == len(reqs)
    for r, q in zip(together, reqs):
        assert r.ok, r.error
        assert r.returns.shape == (q.episodes,) and r.lengths.shape == (q.episodes,)
        assert np.all(r.lengths >= 1) and np.all(r.lengths <= q.max_steps)
    alone = [ev.evaluate([q])[0] for q in reqs]
    reverse = ev.evaluate(reqs[::-1])[::-1]
    variants = {"alone": alone, "reversed": reverse}
    for rows in (1, 3, 1000):
        variants[f"batch_rows={rows}"] = _with_rows(family, spec, rows, max_steps)
    for name, results in variants.items():
        for i, (a, b) in enumerate(zip(together, results)):
            assert _same(a, b), f"{name}: request {i} differs: {a.returns} vs {b.returns}"
    return together


def _with_rows(family, spec, rows: int, max_steps: Sequence[int]) -> list[EvalResult]:
    ev = InProcessEvaluator(family, spec, batch_rows=rows)
    return ev.evaluate(_requests(family, spec, ev, seed=3, max_steps=max_steps))


TERRAIN_CAPS = [100, 40, 100, 70, 25, 100, 100, 55]


def test_terrain_results_depend_only_on_their_request(terrain) -> None:
    family, spec = terrain
    results = _check_request_only(family, spec, TERRAIN_CAPS)
    # not all alike: the comparison above means something
    means = {round(r.mean, 9) for r in results}
    assert len(means) >= 4
    # some episodes end before their cap (falls, finishes) while others in the batch go on
    assert any(r.lengths.min() < cap for r, cap in zip(results, TERRAIN_CAPS))


def _lockstep(env, policy: BatchedPolicy, caps: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of a terrain batch in lock-step (the batch's own step, the batched forward, a numpy
    tally): an independent way to the kernel path's numbers."""
    n = caps.size
    returns, lengths, bad, done = np.zeros(n), np.zeros(n, dtype=np.int64), np.zeros(n, dtype=bool), np.zeros(n, bool)
    obs = env.reset()
    while not done.all():
        obs, rew, term, trunc = env.step(policy.act(obs, done))
        live = ~done
        finite = np.isfinite(rew) & np.isfinite(obs).all(axis=1)
        returns[live & finite] += rew[live & finite]
        bad |= live & ~finite
        lengths[live] += 1
        done |= live & (term | trunc | (lengths >= caps) | ~finite)
    return returns, lengths, bad


@pytest.mark.parametrize("hidden,steps_per_call", [((8, 8), 65536), ((40, 40), 65536), ((8, 8), 500)])
def test_kernel_rows_equal_the_lockstep(hidden, steps_per_call, monkeypatch) -> None:
    """The terrain family's row kernel as the evaluators run it (each row to its end inside one
    compiled call, or in several calls of a few rows) against the same physics in lock-step
    (the batch's step, the batched forward, a tally): the same returns, lengths and bad flags
    bit for bit, on mutated courses with mixed step caps, and with weights large enough to
    give non-finite actions."""
    from poet.evaluation.requests import Rows
    from poet.evaluation.row_loop import _step_kernel

    monkeypatch.setattr("poet.evaluation.row_loop.KERNEL_STEPS_PER_CALL", steps_per_call)

    family = envs.make_family("terrain", {"course_length": 30.0, "max_episode_steps": 400})
    env0 = family.make_env(family.initial())
    spec = spec_for_spaces(env0.observation_space, env0.action_space, hidden, "tanh")
    env0.close()
    rng = np.random.default_rng(11)
    n = 40
    params = mutation_chain(family, n, seed=5)
    seeds = [int(s) for s in rng.integers(0, 2**31, n)]
    caps = rng.choice([1, 7, 60, 400], n).astype(np.int64)
    flats = [(rng.standard_normal(spec.num_params) * rng.choice([0.1, 1.0, 3.0])).astype(np.float32) for _ in range(n)]
    flats[3] = np.full(spec.num_params, np.float32(1e38))  # overflows to inf, then NaN
    flats[4][0] = np.nan
    batch = Rows(params, seeds, caps, BatchedPolicy(spec, np.stack(flats)))
    returns, lengths, bad = _step_kernel(family.row_kernel(), batch, None)

    expected = _lockstep(family.make_batch(params, seeds, int(caps.max())), BatchedPolicy(spec, np.stack(flats)), caps)
    np.testing.assert_array_equal(returns, expected[0])
    np.testing.assert_array_equal(lengths, expected[1])
    np.testing.assert_array_equal(bad, expected[2])
    assert bad.any() and len(set(lengths.tolist())) > 4  # the comparison covers both paths of a row


def test_released_ref_raises_keyerror_naming_the_key(terrain) -> None:
    family, spec = terrain
    ev = InProcessEvaluator(family, spec)
    ref = ev.put(_weights(spec, 1, 12)[0])
    ev.release([ref])
    with pytest.raises(KeyError, match=ref.key):
        ev.evaluate([EvalRequest(ref, family.initial(), 1, 0, 20)])


# ------------------------------------------------------------------ error path
RAISE_ROUGHNESS = 7.7  # the batch env raises on step 3 when a row has this roughness
NAN_ROUGHNESS = 8.8  # the row with this roughness gets a NaN reward on step 4
RAISE_MESSAGE = "simulated physics blow-up"


class FaultyEnv(gym.Wrapper):
    """A terrain env that misbehaves for chosen param values: raises on step 3, or gives a NaN
    reward on step 4."""

    def __init__(self, env, params: EnvParams):
        super().__init__(env)
        self.raises, self.nan = params["roughness"] == RAISE_ROUGHNESS, params["roughness"] == NAN_ROUGHNESS
        self.t = 0

    def reset(self, **kwargs):
        self.t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        self.t += 1
        if self.raises and self.t == 3:
            raise RuntimeError(RAISE_MESSAGE)
        obs, rew, term, trunc, info = self.env.step(action)
        return obs, (np.nan if self.nan and self.t == 4 else rew), term, trunc, info


@row_step
def _faulty_step(data, row, action, state, obs):
    """Terrain's step, with a NaN reward on step 4 of a row flagged in the data's last values
    (state[KERNEL_STATE] counts the row's steps)."""
    reward, ended = terrain_core.kernel_step(data, row, action, state, obs)
    state[terrain_core.KERNEL_STATE] += 1.0
    if data[2][2 + row] > 0.0 and state[terrain_core.KERNEL_STATE] == 4.0:
        reward = np.nan
    return reward, ended


class TerrainWrapper:
    """The terrain family (course_length 20), every method delegated; no row kernel, so its
    episodes run as gymnasium envs."""

    name = "terrain"

    def __init__(self):
        self.inner = envs.make_family("terrain", {"course_length": 20.0})

    def initial(self):
        return self.inner.initial()

    def mutate(self, params, rng):
        return self.inner.mutate(params, rng)

    def make_env(self, params, render_mode=None):
        return self.inner.make_env(params, render_mode)

    def features(self, params):
        return self.inner.features(params)

    def validate(self, params):
        self.inner.validate(params)

    def flat(self, params):
        return self.inner.flat(params)


class FaultySlotsFamily(TerrainWrapper):
    """Terrain as gymnasium envs, misbehaving as FaultyEnv does."""

    def make_env(self, params, render_mode=None):
        return FaultyEnv(self.inner.make_env(params, render_mode), params)


class FaultyKernelFamily(TerrainWrapper):
    """Terrain's row kernel, misbehaving: building a batch with a RAISE_ROUGHNESS row raises,
    a NAN_ROUGHNESS row gets a NaN reward on its step 4 (a compiled step of this module's)."""

    def row_kernel(self):
        inner = self.inner.row_kernel()

        def data(params, seeds):
            if any(p["roughness"] == RAISE_ROUGHNESS for p in params):
                raise RuntimeError(RAISE_MESSAGE)
            table, ints, floats = inner.data(params, seeds)
            flags = [1.0 if p["roughness"] == NAN_ROUGHNESS else 0.0 for p in params]
            return table, ints, np.concatenate([floats, flags])

        return dataclasses.replace(inner, state_size=inner.state_size + 1, data=data, step=_faulty_step)


class RecordingTerrainFamily(TerrainWrapper):
    """Terrain that records the rows of every batch it builds for its row kernel."""

    def __init__(self):
        super().__init__()
        self.batches: list[int] = []

    def row_kernel(self):
        inner = self.inner.row_kernel()

        def data(params, seeds):
            self.batches.append(len(params))
            return inner.data(params, seeds)

        return dataclasses.replace(inner, data=data)


@pytest.mark.parametrize(
    "batch_rows, sizes", [(3, [3, 3, 3, 3, 3]), (4, [3, 4, 2, 4, 2]), (2, [1, 2, 3, 1, 2, 3, 1, 2]), (1000, [15])]
)
def test_batch_rows_bounds_batches_without_splitting_requests(terrain, batch_rows, sizes) -> None:
    # episodes per request: 1, 2, 3, 1, 2, 3, 1, 2 (15 rows); batches are filled greedily in order,
    # and a request larger than batch_rows gets a batch of its own
    family, spec = RecordingTerrainFamily(), terrain[1]
    ev = InProcessEvaluator(family, spec, batch_rows=batch_rows)
    reqs = _requests(family, spec, ev, seed=3, max_steps=[20] * 8)
    assert [q.episodes for q in reqs] == [1, 2, 3, 1, 2, 3, 1, 2]
    ev.evaluate(reqs)
    assert family.batches == sizes


@pytest.fixture(scope="module", params=["kernel", "slots"])
def faulty(terrain, request):
    """Terrain misbehaving on its row kernel's path, and as gymnasium envs."""
    return (FaultyKernelFamily() if request.param == "kernel" else FaultySlotsFamily()), terrain[1]


def _good_requests(family, ev, spec) -> list[EvalRequest]:
    refs = [ev.put(w) for w in _weights(spec, 3, 21)]
    envs_ = [family.initial(), *mutation_chain(family, 2, 4)]
    return [EvalRequest(refs[i], envs_[i], 2, 500 + i, 60, tag=f"good{i}") for i in range(3)]


@pytest.mark.parametrize(
    "kind, roughness, message",
    [
        ("raise", RAISE_ROUGHNESS, f"RuntimeError: {RAISE_MESSAGE}"),
        ("nan", NAN_ROUGHNESS, "the env returned a non-finite reward or observation"),
    ],
)
@pytest.mark.parametrize("batch_rows", [4096, 3])
def test_bad_request_is_isolated(faulty, kind, roughness, message, batch_rows) -> None:
    family, spec = faulty
    ev = InProcessEvaluator(family, spec, batch_rows=batch_rows)
    good = _good_requests(family, ev, spec)
    bad_env = family.initial().replace(roughness=roughness)
    bad = EvalRequest(good[0].policy, bad_env, 2, 987654, 60, tag=f"the {kind} one")
    baseline = ev.evaluate(good)
    steps_before = ev.env_steps
    mixed = ev.evaluate([good[0], bad, good[1], good[2]])
    assert [r.ok for r in mixed] == [True, False, True, True]
    # env steps count what the results report: none for the bad request
    assert ev.env_steps - steps_before == simulated_steps(good, baseline) == sum(r.steps for r in baseline)
    for a, b in zip(baseline, [mixed[0], mixed[2], mixed[3]]):
        assert _same(a, b)
    err = mixed[1].error
    assert err.message == message
    assert err.env_json == bad_env.to_json()
    assert err.tag == f"the {kind} one"
    assert err.seed == 987654
    assert np.isnan(mixed[1].mean)
    assert mixed[1].returns.shape == (2,)
    text = err.describe()
    assert "the " + kind + " one" in text and bad_env.to_json() in text and "987654" in text and message in text


def test_faulty_family_is_a_plain_terrain_family_otherwise(faulty, terrain) -> None:
    family, spec = faulty
    ev_f, ev_t = InProcessEvaluator(family, spec), InProcessEvaluator(terrain[0], spec)
    for a, b in zip(
        ev_f.evaluate(_good_requests(family, ev_f, spec)), ev_t.evaluate(_good_requests(family, ev_t, spec))
    ):
        assert _same(a, b)


def _mixed_results(faulty) -> list[EvalResult]:
    family, spec = faulty
    ev = InProcessEvaluator(family, spec)
    good = _good_requests(family, ev, spec)
    bad = EvalRequest(
        good[1].policy, family.initial().replace(roughness=RAISE_ROUGHNESS), 1, 31, 60, tag="p7 eligibility"
    )
    return [good[0], bad, good[2]], ev.evaluate([good[0], bad, good[2]])


def test_error_policy_stop_raises_naming_the_tag(faulty) -> None:
    _, results = _mixed_results(faulty)
    with pytest.raises(EvaluationFailed, match="p7 eligibility") as info:
        ErrorPolicy(on_error="stop").scores(results)
    assert RAISE_MESSAGE in str(info.value) and "seed 31" in str(info.value)
    # the default policy is stop
    with pytest.raises(EvaluationFailed):
        ErrorPolicy().scores(results)


def test_error_policy_score_as_failure(faulty) -> None:
    _, results = _mixed_results(faulty)
    out = ErrorPolicy(on_error="score_as_failure", failure_score=-123.5).scores(results)
    np.testing.assert_array_equal(out, [results[0].mean, -123.5, results[2].mean])
    assert ErrorPolicy(on_error="score_as_failure").scores(results)[1] == -100.0
    # nothing failed: plain means, also under "stop"
    np.testing.assert_array_equal(ErrorPolicy().scores([results[0], results[2]]), [results[0].mean, results[2].mean])


# ------------------------------------------------------------------ batched policy
def _mlp_actions(spec, flat: np.ndarray, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mlp = MLPPolicy(spec)
    mlp.load_flat(flat)
    np.testing.assert_array_equal(mlp.get_flat(), flat)
    with torch.no_grad():
        raw = mlp(torch.as_tensor(obs[None, :]))
    return to_actions(spec, raw)[0], raw.numpy()[0]


def _numpy_forward(spec, flat: np.ndarray, obs: np.ndarray) -> np.ndarray:
    """An independent forward pass from the documented flat layout (W (out, in) row-major, then b)."""
    h, off = obs.astype(np.float64), 0
    sizes = spec.layer_sizes
    for i in range(len(sizes) - 1):
        fi, fo = sizes[i], sizes[i + 1]
        w = flat[off : off + fi * fo].reshape(fo, fi)
        off += fi * fo
        b = flat[off : off + fo]
        off += fo
        h = w @ h + b
        if i < len(sizes) - 2:
            h = np.tanh(h)
    return h


@pytest.mark.parametrize("fixture", ["terrain", "cartpole"])
def test_batched_policy_matches_mlp_policy(fixture, request) -> None:
    family, spec = request.getfixturevalue(fixture)
    rng = np.random.default_rng(6)
    n = 7
    flats = np.stack(_weights(spec, n, 13, scale=1.0))
    obs = rng.standard_normal((n, spec.obs_dim)).astype(np.float32)
    acts = BatchedPolicy(spec, flats).act(obs)
    assert acts.shape == ((n,) if spec.action_kind == "discrete" else (n, spec.act_dim))
    for i in range(n):
        expected, raw = _mlp_actions(spec, flats[i], obs[i])
        np.testing.assert_allclose(_numpy_forward(spec, flats[i], obs[i]), raw, atol=1e-5)
        if spec.action_kind == "discrete":
            assert acts[i] == expected == int(np.argmax(_numpy_forward(spec, flats[i], obs[i])))
        else:
            np.testing.assert_allclose(acts[i], expected, rtol=0, atol=1e-6)
            assert np.all(acts[i] >= -1.0) and np.all(acts[i] <= 1.0)
    if spec.action_kind == "discrete":
        assert len(set(acts.tolist())) == spec.act_dim  # both actions occur
    # a row's output does not depend on the other rows, nor on rows skipped as done
    done = np.ones(n, dtype=bool)
    done[[5, 2]] = False
    np.testing.assert_array_equal(BatchedPolicy(spec, flats).act(obs, done)[[5, 2]], acts[[5, 2]])
    for i in (0, 3):
        np.testing.assert_array_equal(BatchedPolicy(spec, flats[i : i + 1]).act(obs[i : i + 1])[0], acts[i])
    # rows that read their weights through an index: the same outputs as a copy per row
    index = np.array([4, 0, 4, 6, 1, 1, 0])
    np.testing.assert_array_equal(
        BatchedPolicy(spec, flats, index).act(obs), BatchedPolicy(spec, flats[index]).act(obs)
    )


@pytest.mark.parametrize("activation", ["tanh", "relu"])
def test_compiled_forward_is_a_float32_sum_in_input_order_bit_for_bit(activation) -> None:
    """The compiled forward against a plain numpy float32 loop over inputs (each product and
    each sum rounded to float32 in input order), with the forward's own tanh: equal bits,
    whatever the layer widths (every way `poet.dense` splits a layer's outputs into vectors:
    passes of 64, 16s with and without a tail of 8, then 4, 2 and 1)."""
    import numba

    from poet.policies import PolicySpec
    from poet.policies.mlp import tanh32

    tanh = numba.njit(lambda x: np.array([tanh32(v) for v in x], dtype=np.float32))
    rng = np.random.default_rng(3)
    shapes = ((22, (40, 40), 2), (5, (13, 6), 3), (8, (4,), 1), (3, (70, 48, 57), 7), (6, (130, 32, 24, 16), 9))
    for obs_dim, hidden, act_dim in shapes:
        spec = PolicySpec(obs_dim, act_dim, hidden, activation, "box", (-1.5,) * act_dim, (2.0,) * act_dim)
        n = 9
        flats = (rng.standard_normal((n, spec.num_params)) * 0.6).astype(np.float32)
        obs = (rng.standard_normal((n, obs_dim)) * 2).astype(np.float32)
        acts = BatchedPolicy(spec, flats).act(obs)
        sizes = spec.layer_sizes
        for r in range(n):
            h, off = obs[r], 0
            for layer in range(len(sizes) - 1):
                fi, fo = sizes[layer], sizes[layer + 1]
                w = flats[r, off : off + fi * fo].reshape(fo, fi)
                off += fi * fo
                acc = np.zeros(fo, np.float32)
                for i in range(fi):
                    acc = acc + h[i] * w[:, i]  # float32 product, then float32 sum
                v = acc + flats[r, off : off + fo]
                off += fo
                if layer < len(sizes) - 2:
                    h = tanh(v) if activation == "tanh" else np.where(v < 0, np.float32(0), v)
            low, span = np.float32(-1.5), np.float32(3.5)
            expected = low + (tanh(v) + np.float32(1.0)) * np.float32(0.5) * span
            np.testing.assert_array_equal(acts[r], expected)


def test_batched_policy_box_actions_scaled_to_bounds() -> None:
    # one linear layer with zero weights: raw = bias; action = low + (tanh(b) + 1) / 2 * (high - low)
    from poet.policies import PolicySpec

    spec = PolicySpec(
        obs_dim=2, act_dim=2, hidden=(), action_kind="box", action_low=(-2.0, 0.0), action_high=(2.0, 10.0)
    )
    flat = np.array([0, 0, 0, 0, 0.5, -1.0], dtype=np.float32)
    act = BatchedPolicy(spec, flat[None]).act(np.ones((1, 2), np.float32))[0]
    np.testing.assert_allclose(act, [-2 + (np.tanh(0.5) + 1) * 2, (np.tanh(-1.0) + 1) * 5], atol=1e-6)


def test_batched_policy_rejects_wrong_shape(terrain) -> None:
    _, spec = terrain
    with pytest.raises(ValueError, match=str(spec.num_params)):
        BatchedPolicy(spec, np.zeros((2, spec.num_params + 1), np.float32))


def test_init_flat_matches_spec(terrain) -> None:
    _, spec = terrain
    flat = init_flat(spec, np.random.default_rng(0))
    assert flat.shape == (spec.num_params,) and flat.dtype == np.float32


# ------------------------------------------------------------------ the slot path (gymnasium envs)
def _short_cartpole(limit: int):
    """The cartpole family with a time limit of `limit` steps (gym.make's TimeLimit)."""
    from envs.generic import GymFamily

    return GymFamily(
        {
            "name": "short_cartpole",
            "env_id": "poet/CartPolePhysics-v1",
            "max_episode_steps": limit,
            "params": {"gravity": {"initial": 9.8, "low": 4.0, "high": 20.0, "step": 1.0}},
        }
    )


def _plain_episode(family, spec, weights: np.ndarray, params: EnvParams, seed: int, cap: int) -> tuple[float, int]:
    """One episode the plain gymnasium way: the env as gym.make wraps it, stepped to its end or `cap`."""
    env, policy = family.make_env(params), BatchedPolicy(spec, weights[None])
    obs, _ = env.reset(seed=seed)
    ret, steps = 0.0, 0
    try:
        while steps < cap:
            obs, rew, term, trunc, _ = env.step(policy.act(np.asarray(obs, np.float32)[None])[0])
            ret, steps = ret + float(rew), steps + 1
            if term or trunc:
                break
    finally:
        env.close()
    return ret, steps


def test_direct_step_passes_only_counting_wrappers() -> None:
    import gymnasium as gym

    from poet.evaluation.slots import direct_step

    env = gym.make("CartPole-v1", max_episode_steps=7, disable_env_checker=True)
    step, limit = direct_step(env)
    assert limit == 7 and step == env.unwrapped.step
    checked = gym.make("CartPole-v1")  # the passive checker stays: its checks are the user's to keep
    assert direct_step(checked) == (checked.env.env.step, 500)
    wrapped = gym.wrappers.TransformReward(env, lambda r: 2 * r)  # not ours to skip: stepped as it is
    assert direct_step(wrapped) == (wrapped.step, None)
    assert direct_step(env.unwrapped) == (env.unwrapped.step, None)


def test_slot_episodes_equal_plain_gymnasium_episodes_and_end_at_the_time_limit() -> None:
    """Caps below and above the env's time limit (12): every result is the plain loop's, bit for bit."""
    family = _short_cartpole(12)
    spec = _spec(family)
    ev = InProcessEvaluator(family, spec)
    weights = _weights(spec, 3, seed=5, scale=0.3)
    refs = [ev.put(w) for w in weights]
    caps = [5, 800, 12, 30, 800, 9]
    reqs = [EvalRequest(refs[i % 3], family.initial(), 2, 40 + i, cap) for i, cap in enumerate(caps)]
    results = ev.evaluate(reqs)
    for req, res in zip(reqs, results):
        assert res.ok
        plain = [
            _plain_episode(family, spec, weights[refs.index(req.policy)], req.env, s, req.max_steps)
            for s in episode_seeds(req.seed, req.episodes)
        ]
        np.testing.assert_array_equal(res.returns, [ret for ret, _ in plain])
        np.testing.assert_array_equal(res.lengths, [n for _, n in plain])
    lengths = np.concatenate([r.lengths for r in results])
    assert lengths.max() == 12 and (lengths == 12).sum() >= 2  # the time limit ended episodes whose cap is higher
    assert lengths.min() < 9  # and others ended on their own or at a lower cap


class NonFiniteCartpole:
    """CartPole whose envs give a NaN reward (gravity 5.0) or a NaN observation (gravity 6.0) on step 3."""

    name = "nonfinite_cartpole"

    def __init__(self):
        self.inner = envs.make_family("cartpole")

    def initial(self):
        return self.inner.initial()

    def make_env(self, params, render_mode=None):
        import gymnasium as gym

        class Spoil(gym.Wrapper):
            t = 0

            def reset(self, **kwargs):
                self.t = 0
                return self.env.reset(**kwargs)

            def step(self, action):
                obs, rew, term, trunc, info = self.env.step(action)
                self.t += 1
                if self.t == 3 and params["gravity"] == 5.0:
                    rew = float("nan")
                if self.t == 3 and params["gravity"] == 6.0:
                    obs = np.full_like(obs, np.nan)
                return obs, rew, term, trunc, info

        return Spoil(self.inner.make_env(params, render_mode))


def test_slot_path_errors_the_rows_with_non_finite_values_and_spares_the_rest() -> None:
    family = NonFiniteCartpole()
    spec = _spec(family.inner)
    ev = InProcessEvaluator(family, spec)
    ref = ev.put(_weights(spec, 1, seed=2, scale=0.3)[0])
    good, nan_reward, nan_obs = (family.initial().replace(gravity=g) for g in (9.8, 5.0, 6.0))
    reqs = [
        EvalRequest(ref, env, 3, 10 + i, 50, tag=f"r{i}")
        for i, env in enumerate([good, nan_reward, good, nan_obs, good, good, good, good, good, good])
    ]
    results = ev.evaluate(reqs)
    for i in (1, 3):
        assert results[i].error is not None and "non-finite" in results[i].error.message
        assert results[i].error.tag == f"r{i}" and results[i].lengths.sum() == 0
    for i in (0, 2, 4, 5, 6, 7, 8, 9):
        assert _same(results[i], ev.evaluate([reqs[i]])[0])
    assert ev.env_steps > 0


def test_result_mean_is_numpys_mean_and_nan_on_error_or_no_episode() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 2, 7):
        returns = rng.normal(size=n) * 1e3
        mean = EvalResult(returns=returns, lengths=np.ones(n, dtype=np.int64)).mean
        assert mean == float(np.mean(returns)) and type(mean) is float
    err = EvalError(message="boom", env_json="{}", tag="", seed=0)
    assert np.isnan(EvalResult(returns=np.zeros(1), lengths=np.zeros(1, dtype=np.int64), error=err).mean)
    assert np.isnan(EvalResult(returns=np.zeros(0), lengths=np.zeros(0, dtype=np.int64)).mean)


def test_the_compiled_tanh_is_within_one_ulp_and_keeps_nan() -> None:
    """The forward's tanh against the exact tanh (float64) over the whole range a layer can
    produce, tiny values and the saturated tails; NaN stays NaN."""
    import numba

    from poet.policies.mlp import tanh32

    def tanh_all(x):
        out = np.empty_like(x)
        for i in range(x.size):
            out[i] = tanh32(x[i])
        return out

    # error_model="numpy" lets the compiler vectorise the loop (as in the forward); the
    # default keeps it scalar: both give the same bits
    vector_tanh_all = numba.njit(error_model="numpy")(tanh_all)
    tanh_all = numba.njit(tanh_all)

    rng = np.random.default_rng(0)
    x = np.concatenate(
        [
            rng.uniform(-12, 12, 400_000),
            rng.uniform(-0.01, 0.01, 100_000),
            10.0 ** rng.uniform(-30, 1.2, 100_000) * rng.choice([-1, 1], 100_000),
            [0.0, -0.0, 9.0, -9.0, 1e30, -1e30],
        ]
    ).astype(np.float32)
    y = tanh_all(x)
    assert np.array_equal(vector_tanh_all(x), y)
    exact = np.tanh(x.astype(np.float64))
    ulps = np.abs(y.astype(np.float64) - exact) / np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    assert ulps.max() <= 1.0 and np.abs(y).max() <= 1.0
    assert np.array_equal(np.signbit(y), np.signbit(x))
    assert np.isnan(tanh_all(np.array([np.nan], np.float32))[0])


def test_a_stop_request_ends_a_kernel_batch_between_its_compiled_calls(monkeypatch) -> None:
    """The row kernel's path looks at a stop request between its compiled calls (each of up to
    KERNEL_STEPS_PER_CALL step caps): never before the first, then before each next one."""
    from poet.errors import WaveInterrupted
    from poet.evaluation.requests import Rows
    from poet.evaluation.row_loop import _step_kernel

    monkeypatch.setattr("poet.evaluation.row_loop.KERNEL_STEPS_PER_CALL", 250)
    family = envs.make_family("terrain", {"course_length": 30.0})
    env0 = family.make_env(family.initial())
    spec = spec_for_spaces(env0.observation_space, env0.action_space, (8, 8), "tanh")
    env0.close()
    n = 6
    flats = [init_flat(spec, np.random.default_rng(i)) for i in range(n)]
    caps = np.full(n, 100, dtype=np.int64)  # rows of 100 steps: calls of rows (0, 1), (2, 3), (4, 5)
    params, seeds = [family.initial()] * n, list(range(n))
    polls: list[bool] = []

    def look(stop_at: int) -> bool:
        polls.append(len(polls) + 1 == stop_at)
        return polls[-1]

    batch = Rows(params, seeds, caps, BatchedPolicy(spec, np.stack(flats)))
    with pytest.raises(WaveInterrupted):
        _step_kernel(family.row_kernel(), batch, lambda: look(stop_at=2))
    assert polls == [False, True]
    polls.clear()
    returns, lengths, bad = _step_kernel(family.row_kernel(), batch, lambda: look(stop_at=0))
    assert polls == [False, False] and (lengths > 0).all()


def test_a_rollout_worker_does_not_load_torch() -> None:
    """What a Ray worker imports to run rollouts (the pool's module, a family, the batched
    policy) leaves torch unloaded: loading it would add to every worker's start."""
    assert_torch_stays_unloaded(
        "import envs\nfrom poet.evaluation.ray_pool import RolloutWorker\nfrom poet.policies import BatchedPolicy\n"
    )


@pytest.mark.parametrize("fixture", ["terrain", "cartpole"])
def test_a_wave_leaves_no_reference_cycles(fixture, request) -> None:
    """What a wave allocates is freed when the wave ends, in this process and in a pool worker:
    nothing waits for the cyclic garbage collector, whose full passes walk every object of the
    process. (A recursive closure in `run_requests` once left a cycle per chunk and cost the
    pool 15% on the terrain benchmark's waves.)"""
    import gc

    from poet.evaluation.ray_pool import RolloutWorker, pack_chunk

    family, spec = request.getfixturevalue(fixture)
    ev = InProcessEvaluator(family, spec)
    reqs = _requests(family, spec, ev, seed=4, max_steps=[30, 50, 20])
    worker = RolloutWorker(family, spec.to_dict(), None, 4096)
    head, parts = pack_chunk(RequestTable.of(reqs), range(len(reqs)), ev.policies)
    ev.evaluate(reqs), worker.run(head, *parts)  # first calls: caches filled once
    gc.collect()
    gc.disable()
    try:
        ev.evaluate(reqs)
        assert gc.collect() == 0, "the in-process evaluator left reference cycles"
        worker.run(head, *parts)
        assert gc.collect() == 0, "a pool worker's chunk left reference cycles"
    finally:
        gc.enable()
