"""Policy kinds: every registered kind through one contract, the spec as JSON, the config's
errors, and the evaluators running every kind with the same numbers whatever the workers,
the chunking or the batch a row shares."""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import pytest
import torch

import envs
from poet.config import ConfigError
from poet.evaluation import EvalRequest, InProcessEvaluator, NoiseTable, Perturbation
from poet.evaluation.ray_pool import RayEvaluator
from poet.parts import check_parts, load_config
from poet.policies import PolicySpec, batched_policy, init_flat, param_shapes, spec_for_spaces
from poet.policies.batched import FORWARD_ROWS
from poet.policies.kinds import POLICY_KINDS, build_module
from poet.seeding import Seeds
from tests.conftest import tiny_config

FLAT = gym.spaces.Box(-1.0, 1.0, (12,), dtype=np.float32)
IMAGE = gym.spaces.Box(0.0, 1.0, (6, 5, 3), dtype=np.float32)
BOX = gym.spaces.Box(-2.0, 1.0, (3,), dtype=np.float32)
DISCRETE = gym.spaces.Discrete(4)
# small options per kind, so that the tests run in seconds
SMALL = {
    "mlp": {},
    "cnn": {"channels": [4], "hidden": [8]},
    "lstm": {"hidden": 8, "head": [6]},
    "cnn_lstm": {"channels": [4], "hidden": [8][0], "head": [6]},
}
TORCH_KINDS = [k for k in POLICY_KINDS if k != "mlp"]


def _spec(kind: str, obs: gym.Space = FLAT, act: gym.Space = BOX, **options) -> PolicySpec:
    return spec_for_spaces(obs, act, (8, 8), "tanh", kind, {**SMALL[kind], **options} if kind != "mlp" else None)


# ---------------------------------------------------------------- every kind, one contract


@pytest.mark.parametrize("kind", list(POLICY_KINDS))
@pytest.mark.parametrize(
    "obs,act", [(FLAT, BOX), (IMAGE, DISCRETE), (FLAT, DISCRETE)], ids=["flat-box", "image-discrete", "flat-discrete"]
)
def test_every_registered_kind_keeps_the_contract(kind, obs, act):
    spec = _spec(kind, obs, act)
    module = build_module(spec)
    flat = torch.nn.utils.parameters_to_vector(module.parameters())
    assert spec.num_params == flat.numel() == sum(int(np.prod(s)) for s in param_shapes(spec))
    assert isinstance(module.state_size, int) and module.state_size == spec.state_size
    rows = 5
    x = torch.as_tensor(np.random.default_rng(0).random((rows, *spec.shape), dtype=np.float32))
    state = torch.zeros(rows, spec.state_size)
    out, next_state = module(x, state)
    assert out.shape == (rows, spec.act_dim) and next_state.shape == (rows, spec.state_size)
    # a row's outputs are its own: the same row alone gives the same numbers (up to round-off)
    alone, _ = module(x[2:3], state[2:3])
    torch.testing.assert_close(alone[0], out[2])
    # every init scheme gives a vector of the right length, the same one from the same stream
    for scheme in ("reference", "normc", "orthogonal"):
        w = init_flat(spec, np.random.default_rng(4), scheme)
        assert w.dtype == np.float32 and w.shape == (spec.num_params,)
        np.testing.assert_array_equal(w, init_flat(spec, np.random.default_rng(4), scheme))


@pytest.mark.parametrize("kind", TORCH_KINDS)
def test_the_batched_forward_is_the_modules_forward_with_zero_state_at_each_start(kind):
    """The evaluators' batched forward runs the module with the row's weights: the same
    actions as the module itself run step by step, the state carried and zero at a start."""
    spec = _spec(kind)
    weights = init_flat(spec, np.random.default_rng(1), "orthogonal") * 3
    policy = batched_policy(spec, weights[None, :])
    module = build_module(spec)
    torch.nn.utils.vector_to_parameters(torch.as_tensor(weights), module.parameters())
    rng = np.random.default_rng(2)
    obs = [rng.standard_normal((1, spec.obs_dim)).astype(np.float32) for _ in range(4)]
    policy.begin(0)
    state = torch.zeros(1, spec.state_size)
    for x in obs:
        raw, state = module(torch.as_tensor(x), state)
        expected = spec.action_low + (np.tanh(raw.detach().numpy()) + 1) * 0.5 * (
            np.array(spec.action_high) - spec.action_low
        )
        np.testing.assert_allclose(policy.act(x), expected, rtol=1e-5, atol=1e-6)
    policy.begin(0)  # a new episode: the state starts at zero again
    first, _ = module(torch.as_tensor(obs[0]), torch.zeros(1, spec.state_size))
    np.testing.assert_allclose(policy.raw(obs[0]), first.detach().numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", TORCH_KINDS)
def test_a_rows_numbers_never_depend_on_the_rows_beside_it(kind):
    """Bit for bit: a row alone, among rows of its own policy or of others, at any position,
    in batches smaller and larger than one network call."""
    spec = _spec(kind)
    rng = np.random.default_rng(3)
    weights = np.stack([init_flat(spec, rng, "orthogonal") * 2 for _ in range(3)])
    steps = [rng.standard_normal(spec.obs_dim).astype(np.float32) for _ in range(5)]

    def trace(n: int, position: int, index: np.ndarray) -> list[np.ndarray]:
        policy = batched_policy(spec, weights, index)
        out = []
        for x in steps:
            obs = np.random.default_rng(n).standard_normal((n, spec.obs_dim)).astype(np.float32)
            obs[position] = x
            out.append(policy.raw(obs)[position])
        return out

    expected = trace(1, 0, np.array([0]))
    for n in (2, FORWARD_ROWS, FORWARD_ROWS + 3):
        for position in (0, n - 1):
            for index in (np.zeros(n, dtype=np.int64), np.arange(n) % 3):
                index = index.copy()
                index[position] = 0
                got = trace(n, position, index)
                for a, b in zip(expected, got):
                    np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------- the spec as a value


def test_an_mlp_spec_writes_what_it_always_wrote_and_an_older_one_reads_as_mlp():
    spec = _spec("mlp")
    d = spec.to_dict()
    assert set(d) == {"obs_dim", "act_dim", "hidden", "activation", "action_kind", "action_low", "action_high"}
    assert PolicySpec.from_dict(d) == spec and PolicySpec.from_dict(d).kind == "mlp"


@pytest.mark.parametrize("kind", TORCH_KINDS)
def test_a_kinds_spec_round_trips_through_json_with_its_options(kind):
    import json

    spec = _spec(kind, IMAGE, DISCRETE)
    back = PolicySpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert back == spec and hash(back) == hash(spec)
    assert back.options_dict() == {**dataclasses.asdict(build_module(spec).Options()), **SMALL[kind]} or back.options


def test_the_mlp_init_schemes_give_the_numbers_of_the_layers_they_describe():
    """The schemes walk parameter shapes; for an mlp those are its layers, in the order the
    references draw them (a matrix, then its zero bias): pinned against a direct draw."""
    spec = _spec("mlp")
    rng = np.random.default_rng(9)
    parts = []
    for fan_in, fan_out in zip(spec.layer_sizes[:-1], spec.layer_sizes[1:]):
        w = rng.standard_normal((fan_out, fan_in))
        w *= (0.01 if fan_out == spec.act_dim else 1.0) / np.sqrt(np.square(w).sum(axis=1, keepdims=True))
        parts += [w.ravel(), np.zeros(fan_out)]
    np.testing.assert_array_equal(
        init_flat(spec, np.random.default_rng(9), "normc"), np.concatenate(parts).astype(np.float32)
    )


# ---------------------------------------------------------------- the config


def _parts(**policy):
    cfg = tiny_config(policy=policy)
    return check_parts(load_config(data=cfg))


def test_policy_kind_and_options_build_the_spec():
    parts = _parts(kind="lstm", options={"hidden": 8})
    assert parts.spec.kind == "lstm" and parts.spec.options_dict()["hidden"] == 8
    assert parts.spec.state_size == 16 and parts.spec.obs_shape == (parts.spec.obs_dim,)


@pytest.mark.parametrize(
    "policy,field",
    [
        ({"kind": "transformer"}, "policy.kind: unknown policy kind 'transformer'"),
        ({"kind": "lstm", "options": {"hiden": 8}}, "policy.options.hiden: policy kind 'lstm' has no option 'hiden'"),
        ({"kind": "lstm", "options": {"hidden": 0}}, "policy.options.hidden: must be >= 1"),
        ({"kind": "mlp", "options": {"hidden": [8]}}, "policy.options.hidden: the mlp kind takes its options as"),
        ({"kind": "cnn", "options": {"kernel": 30}}, "policy.options: kind 'cnn'"),
        ({"kind": "nosuchmodule:Net"}, "policy.kind: cannot import policy kind module 'nosuchmodule'"),
        ({"kind": "tests.test_policies:NotANet"}, "is not a torch.nn.Module subclass"),
    ],
)
def test_a_bad_policy_is_a_config_error_naming_the_field(policy, field):
    with pytest.raises(ConfigError, match=field.replace("(", r"\(")):
        _parts(**policy)


class NotANet:
    """Not a torch module."""


def test_ppo_with_a_torch_kind_needs_raw_observations():
    cfg = tiny_config(policy={"kind": "cnn", "options": SMALL["cnn"]})
    cfg["trainer"] = {"name": "ppo"}
    with pytest.raises(ConfigError, match="trainer.ppo.normalize_obs: policy kind 'cnn' cannot fold"):
        check_parts(load_config(data=cfg))
    cfg["trainer"] = {"name": "ppo", "ppo": {"normalize_obs": False}}
    assert check_parts(load_config(data=cfg)).spec.kind == "cnn"


# ---------------------------------------------------------------- the evaluators run every kind

TERRAIN = envs.make_family("terrain", {"course_length": 25.0})
CARTPOLE = envs.make_family("cartpole")


def _family_spec(family, kind):
    env = family.make_env(family.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (8,), "tanh", kind, SMALL[kind])
    env.close()
    return spec


def _wave(ev, family, spec, n_policies=3):
    rng = np.random.default_rng(5)
    params = [family.initial()]
    while len(params) < 3:
        params.append(family.mutate(params[-1], rng))
    refs = [ev.put(init_flat(spec, np.random.default_rng(i), "orthogonal") * 2) for i in range(n_policies)]
    reqs = []
    for i, ref in enumerate(refs):
        for j, p in enumerate(params):
            reqs.append(EvalRequest(ref, p, 1 + (i + j) % 3, 100 * i + j, 40 + 30 * (j % 3), tag=f"p{i} e{j}"))
            reqs.append(EvalRequest(ref, p, 1, 7 + i, 80, Perturbation(11 * i + j, 0.05, 1 - 2 * (j % 2))))
    return reqs


def _same(a, b) -> None:
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert (x.error is None) == (y.error is None), (x.error, y.error)
        np.testing.assert_array_equal(x.returns, y.returns)
        np.testing.assert_array_equal(x.lengths, y.lengths)


@pytest.mark.parametrize("kind", TORCH_KINDS)
@pytest.mark.parametrize("family", [TERRAIN, CARTPOLE], ids=["terrain", "cartpole"])
def test_every_kind_gives_the_same_results_whatever_the_batching(kind, family):
    """In-process: the whole wave, each request alone, and the wave reversed."""
    spec = _family_spec(family, kind)
    noise = NoiseTable(Seeds(7).sequence("noise"), spec.num_params + 1000)
    ev = InProcessEvaluator(family, spec, noise, batch_rows=5)
    reqs = _wave(ev, family, spec)
    whole = ev.evaluate(reqs)
    assert all(r.ok for r in whole) and sum(int(r.lengths.sum()) for r in whole) > 0
    _same([ev.evaluate([r])[0] for r in reqs], whole)
    _same(ev.evaluate(list(reversed(reqs)))[::-1], whole)
    # perturbed requests ran perturbed weights: not the plain policy's numbers
    perturbed = [i for i, r in enumerate(reqs) if r.perturbation is not None]
    plain = ev.evaluate([dataclasses.replace(reqs[i], perturbation=None) for i in perturbed])
    assert any(not np.array_equal(whole[i].returns, p.returns) for i, p in zip(perturbed, plain))


@pytest.mark.parametrize(
    "kind,family", [("cnn", CARTPOLE), ("lstm", TERRAIN), ("cnn_lstm", TERRAIN)], ids=["cnn", "lstm", "cnn_lstm"]
)
def test_the_pool_runs_every_kind_as_in_process_with_any_workers_and_chunks(ray_local, kind, family):
    """Per kind, one family (gymnasium slots for one, a compiled family's lock-step for the
    others: in-process, every kind runs on both, above)."""
    spec = _family_spec(family, kind)
    noise = NoiseTable(Seeds(7).sequence("noise"), spec.num_params + 1000)
    ref_ev = InProcessEvaluator(family, spec, noise)
    expected = ref_ev.evaluate(_wave(ref_ev, family, spec))
    for workers, chunkings in [(1, [1]), (2, [3, None])]:  # None: the pool's own plan
        ev = RayEvaluator(family, spec, noise, workers=workers, local_wave_steps=0)
        try:
            for chunks in chunkings:
                ev.chunks_per_worker = chunks
                _same(ev.evaluate(_wave(ev, family, spec)), expected)
        finally:
            ev.close()


# ---------------------------------------------------------------- a run of a kind, read back


@pytest.fixture(scope="module")
def lstm_run(tmp_path_factory):
    import poet
    from poet.analysis import load_run

    out = tmp_path_factory.mktemp("kinds") / "run"
    cfg = tiny_config(iterations=6, policy={"kind": "lstm", "options": SMALL["lstm"]}, checkpoint={"every": 3})
    poet.run(cfg, out=out, progress=False)
    return load_run(out)


def test_a_kinds_run_records_its_kind_and_cross_evaluates_to_its_own_scores(lstm_run):
    assert lstm_run.info["policy"]["kind"] == "lstm"
    matrix = lstm_run.cross_eval(cache=False)
    last = lstm_run.iterations[lstm_run.iterations["iteration"] == 5]
    assert len(last)
    for row in last.itertuples():
        assert matrix.loc[row.pair_id, row.env_id] == row.score
    curves = lstm_run.robustness(1, n=4, seed=3)
    assert np.isfinite(curves["cvar"]).all()


def test_a_rendered_episode_of_a_kind_returns_its_score(lstm_run):
    """`poet render` steps the family's gymnasium env with the batched forward; the score
    came from the compiled family's lock-step: the same return, bit for bit."""
    from poet.analysis.agents import resolve_envs
    from poet.analysis.render import load_agents, play_episode

    parts, _ = load_agents(lstm_run.path)
    agent = lstm_run.agents()[0]
    scored = lstm_run.score([agent], [agent.env_id])["score"].iloc[0]
    (target,) = resolve_envs(lstm_run, [agent.env_id])
    assert target.course_seed is not None  # one course: its episode is the score
    episode = play_episode(parts.family, parts.spec, agent.theta, target, 0, 150, "terrain")
    assert episode.ret == scored


@pytest.mark.parametrize(
    "kind,trainer",
    [
        (
            "lstm",
            {
                "name": "ppo",
                "ppo": {"n_envs": 2, "n_steps": 32, "epochs": 2, "minibatch_size": 32, "normalize_obs": False},
            },
        ),
        ("cnn", None),
    ],
    ids=["lstm-ppo", "cnn-es"],
)
def test_a_kinds_run_stopped_and_resumed_equals_the_straight_run(tmp_path, kind, trainer):
    """A resume rebuilds the network from the run's config and loads the weights as arrays:
    the tables and the final state are the straight run's, bit for bit."""
    import poet
    from tests.test_checkpoint import _assert_same_run

    extra = {"trainer": trainer} if trainer else {}
    cfg = tiny_config(iterations=6, policy={"kind": kind, "options": SMALL[kind]}, checkpoint={"every": 2}, **extra)
    poet.run(cfg, out=tmp_path / "straight", progress=False)
    poet.run({**cfg, "iterations": 4}, out=tmp_path / "resumed", progress=False)
    poet.resume(tmp_path / "resumed", iterations=6, progress=False)
    _assert_same_run(tmp_path / "straight", tmp_path / "resumed")


@pytest.mark.parametrize("curriculum", ["accel", "dr"])
def test_the_ued_curricula_train_a_recurrent_policy_with_ppo(tmp_path, curriculum):
    """dcd's curricula run PPO by default (raw observations, as dcd): their training jobs and
    their level-scoring jobs both run the lstm, its state carried per env."""
    import poet
    from poet.analysis import load_run

    options = {"accel": {"buffer_size": 6, "num_levels": 3}, "robust_plr": {"buffer_size": 6, "num_levels": 3}}
    cfg = tiny_config(
        curriculum=curriculum,
        curriculum_options=options.get(curriculum, {"num_levels": 2}),
        iterations=8,
        policy={"kind": "lstm", "options": SMALL["lstm"]},
        trainer={"name": "ppo", "ppo": {"n_envs": 2, "n_steps": 150, "epochs": 2, "minibatch_size": 150}},
    )
    cfg.pop("reproduction")
    cfg.pop("transfer")
    poet.run(cfg, out=tmp_path / "r", progress=False)
    run = load_run(tmp_path / "r")
    assert run.info["policy"]["kind"] == "lstm" and len(run.iterations) >= 1
    assert np.isfinite(run.iterations["score"]).all()
