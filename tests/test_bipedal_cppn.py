"""The `bipedal_cppn` family: BipedalWalker on ground drawn by an evolved CPPN (Enhanced POET)."""
from __future__ import annotations

import os

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")

import copy  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from gymnasium.utils.env_checker import check_env  # noqa: E402

pytest.importorskip("Box2D")

import envs  # noqa: E402
from envs import cppn  # noqa: E402
from envs.base import EnvParamError, EnvParams  # noqa: E402
from envs.bipedal_cppn import (  # noqa: E402
    AMPLITUDE_MAX,
    CPPN_X,
    TERRAIN_HEIGHT,
    TERRAIN_STARTPAD,
    BipedalCPPNFamily,
    ground_heights,
)
from tests.conftest import mutation_chain  # noqa: E402


@pytest.fixture(scope="module")
def family() -> BipedalCPPNFamily:
    return envs.make_family("bipedal_cppn")


@pytest.fixture(scope="module")
def chain100(family) -> list[EnvParams]:
    return mutation_chain(family, 100, seed=7)


def _ground(family: BipedalCPPNFamily, p: EnvParams, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    env = family.make_env(p)
    env.reset(seed=seed)
    xs, ys = np.array(env.terrain_x), np.array(env.terrain_y)
    env.close()
    return xs, ys


def _returns(family: BipedalCPPNFamily, p: EnvParams, seed: int, steps: int = 60) -> list[float]:
    env = family.make_env(p)
    obs, _ = env.reset(seed=seed)
    actions = np.random.default_rng(123).uniform(-1, 1, size=(steps, 4)).astype(np.float32)
    out = []
    for a in actions:
        obs, r, term, trunc, _ = env.step(a)
        out.append(r)
        if term or trunc:
            break
    env.close()
    return out + obs.tolist()


def test_genome_json_round_trip(family, chain100) -> None:
    for p in [family.initial(), *chain100[::10], chain100[-1]]:
        q = EnvParams.from_json(p.to_json())
        assert q == p and q.id == p.id and q.to_json() == p.to_json()
        g = p["genome"]
        assert json.loads(json.dumps(g)) == g


def test_evaluate_deterministic(chain100) -> None:
    g = chain100[-1]["genome"]
    xs = np.linspace(-4, 4, 301)
    a, b = cppn.evaluate(g, xs), cppn.evaluate(copy.deepcopy(g), xs.copy())
    assert a.dtype == np.float64 and a.shape == xs.shape and np.array_equal(a, b)
    # pointwise: evaluating one x at a time gives the same numbers
    assert np.array_equal(a[::50], np.array([cppn.evaluate(g, np.array([x]))[0] for x in xs[::50]]))
    # initial genome: w * x + b
    g0 = cppn.initial_genome(weight=0.5, bias_weight=0.25)
    assert np.allclose(cppn.evaluate(g0, xs), 0.5 * xs + 0.25)


def test_mutation_reproducible_valid_and_changes(family, chain100) -> None:
    again = mutation_chain(family, 100, seed=7)
    assert [p.id for p in again] == [p.id for p in chain100]
    assert [p.id for p in mutation_chain(family, 5, seed=8)] != [p.id for p in chain100[:5]]
    parent = family.initial()
    for child in chain100:
        g = child["genome"]
        family.validate(child)  # includes the acyclic check
        assert cppn.input_reaches_output(g)
        assert cppn._topo_order([n["id"] for n in g["nodes"]], cppn._pairs(g)) is not None
        diff = np.max(np.abs(ground_heights(g) - ground_heights(parent["genome"])))
        assert diff > 1e-6
        assert child.id != parent.id
        parent = child
    assert max(cppn.num_hidden(p["genome"]) for p in chain100) > 0  # structure does grow


def test_ground_shape(family, chain100) -> None:
    flat = ground_heights(family.initial()["genome"])
    assert np.all(flat == TERRAIN_HEIGHT)
    for p in chain100[::7]:
        y = ground_heights(p["genome"])
        assert np.all(y[: TERRAIN_STARTPAD + 2] == TERRAIN_HEIGHT)  # flat pad, continuous join
        assert np.max(np.abs(y - TERRAIN_HEIGHT)) <= AMPLITUDE_MAX + 1e-9
        f = family.features(p)
        assert f.dtype == np.float64 and f.shape == (20,)
        flat_cols = family.flat(p)
        assert all(isinstance(v, float) for v in flat_cols.values())


def _bad(genome_edit) -> EnvParams:
    g = cppn.initial_genome(weight=0.3)
    g["nodes"].append({"id": 1, "kind": "hidden", "activation": "sin"})
    g["connections"] += [
        {"in": -1, "out": 1, "weight": 1.0, "enabled": True},
        {"in": 1, "out": 0, "weight": 1.0, "enabled": True},
    ]
    g = cppn._canonical(g)
    genome_edit(g)
    return EnvParams.create("bipedal_cppn", {"genome": g})


def test_validate_rejects_bad_genomes(family) -> None:
    family.validate(_bad(lambda g: None))

    def act(g):
        g["nodes"][3]["activation"] = "relu"

    def dangling(g):
        g["connections"][-1]["out"] = 9

    def cycle(g):
        g["nodes"].append({"id": 2, "kind": "hidden", "activation": "tanh"})
        g["connections"][:] = cppn._canonical(
            {"nodes": [], "connections": g["connections"] + [
                {"in": 1, "out": 2, "weight": 1.0, "enabled": True},
                {"in": 2, "out": 1, "weight": 1.0, "enabled": False}]}
        )["connections"]

    def no_output(g):
        g["nodes"][:] = [n for n in g["nodes"] if n["kind"] != "output"]
        g["connections"][:] = [c for c in g["connections"] if c["out"] != 0]

    def weight(g):
        g["connections"][0]["weight"] = 50.0

    cases = [
        (act, "genome.nodes[3].activation", "relu"),
        (dangling, "genome.connections[3].out", "dangling"),
        (cycle, "genome.connections", "cycle"),
        (no_output, "genome.nodes", "output"),
        (weight, "genome.connections[0].weight", ""),
    ]
    for edit, field, word in cases:
        with pytest.raises(EnvParamError) as err:
            family.validate(_bad(edit))
        assert err.value.family == "bipedal_cppn" and err.value.field == field, str(err.value)
        assert word in str(err.value)
    with pytest.raises(EnvParamError) as err:
        family.validate(EnvParams.create("bipedal_cppn", {}))
    assert err.value.field == "genome"
    with pytest.raises(EnvParamError) as err:
        family.validate(EnvParams.create("bipedal", family.initial().values))
    assert err.value.field == "family"
    with pytest.raises(EnvParamError):
        family.make_env(_bad(act))


def test_check_env_initial_and_mutated(family, chain100) -> None:
    for p in [family.initial(), *chain100[:20]]:
        env = family.make_env(p)
        check_env(env.unwrapped, skip_render_check=True)
        env.close()


def test_same_params_same_terrain_and_returns(family, chain100) -> None:
    for p in [chain100[4], chain100[-1]]:
        xs1, ys1 = _ground(family, p, seed=1)
        xs2, ys2 = _ground(family, p, seed=2)  # the ground does not depend on the seed
        xs3, ys3 = _ground(family, EnvParams.from_json(p.to_json()), seed=1)
        assert np.array_equal(ys1, ys2) and np.array_equal(ys1, ys3) and np.array_equal(xs1, xs3)
        assert np.array_equal(ys1, ground_heights(p["genome"]))
        assert _returns(family, p, seed=3) == _returns(family, EnvParams.from_json(p.to_json()), seed=3)
    img = family.render_profile(chain100[-1], seed=0)
    assert img.shape == (200, 800, 3) and img.dtype == np.uint8


def test_poet_run_rebuilds_every_env_from_records(tmp_path) -> None:
    import poet
    import poet.analysis
    from tests.conftest import tiny_config

    cfg = tiny_config(
        env={"family": "bipedal_cppn", "options": {}},
        iterations=5,
        reproduction={"every": 2, "threshold": -1000.0, "mc_lower": -1000.0, "mc_upper": 1000.0},
        evaluation={"max_steps": 40, "eval_episodes": 1, "backend": "inprocess"},
        trainer={"name": "es", "options": {"population": 4, "noise_table_size": 200_000}},
    )
    poet.run(cfg, out=tmp_path, progress=False)
    rows = poet.analysis.load_run(tmp_path).envs
    fam = envs.make_family("bipedal_cppn")
    assert len(rows) >= 2  # the root and at least one child
    ids = set()
    by_id = {}
    for _, row in rows.iterrows():
        p = EnvParams.from_json(row["params_json"])
        assert p.id == row["env_id"]  # the recorded id is the content id of the recorded genome
        ids.add(p.id)
        by_id[p.id] = p
        fam.validate(p)
        rebuilt = _ground(fam, p)[1]
        assert np.array_equal(rebuilt, ground_heights(p["genome"]))
        assert np.array_equal(rebuilt, _ground(fam, EnvParams.from_json(p.to_json()))[1])
        # the ground statistics the run recorded from its live genome, recomputed from the
        # rebuilt terrain, match exactly
        h = rebuilt[TERRAIN_STARTPAD + 1:] - TERRAIN_HEIGHT
        for column, value in fam.flat(p).items():
            assert row[column] == value, column
        assert row["amplitude"] == float(np.max(np.abs(h)))
    for _, row in rows.iterrows():  # every child's ground differs from its parent's
        parent = row["parent_env_id"]
        if isinstance(parent, str) and parent:
            assert not np.array_equal(_ground(fam, by_id[row["env_id"]])[1], _ground(fam, by_id[parent])[1])
    assert fam.initial().id in ids and len(ids) >= 2
    assert np.all(np.isfinite(CPPN_X))


def test_render_rgb_frames_show_the_cppn_ground(family, chain100) -> None:
    frames = []
    for p in (family.initial(), chain100[-1]):
        env = family.make_env(p, render_mode="rgb_array")
        env.reset(seed=0)
        env.step(np.zeros(4, dtype=np.float32))
        frame = env.render()
        env.close()
        assert frame.shape == (400, 600, 3) and frame.dtype == np.uint8
        frames.append(frame)
    assert not np.array_equal(frames[0], frames[1])  # the hills are drawn


def test_gymnasium_id(chain100) -> None:
    import gymnasium as gym

    from envs.bipedal_cppn import BipedalCPPNEnv

    genome = chain100[-1]["genome"]
    env = gym.make("poet/BipedalCPPN-v0", params={"genome": genome})
    assert isinstance(env.unwrapped, BipedalCPPNEnv)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (24,)
    assert np.array_equal(np.array(env.unwrapped.terrain_y), ground_heights(genome))
    env.close()
