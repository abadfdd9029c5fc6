"""The `bipedal_cppn` family: BipedalWalker on ground drawn by an evolved CPPN (Enhanced POET).

The family defaults to the reference's behaviour (operators, amplitude and initial
"reference"); `legacy` is the family with this project's earlier options (extended
operators, normalised amplitude, flat start). Hand-computed pins of the reference's
numbers are in tests/test_cppn_golden.py.
"""

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
    AMPLITUDE_MIN,
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


LEGACY = {"operators": "extended", "amplitude": "normalised", "initial": "flat"}


@pytest.fixture(scope="module")
def legacy() -> BipedalCPPNFamily:
    return envs.make_family("bipedal_cppn", LEGACY)


@pytest.fixture(scope="module")
def chain100(family) -> list[EnvParams]:
    return mutation_chain(family, 100, seed=7)


@pytest.fixture(scope="module")
def legacy100(legacy) -> list[EnvParams]:
    return mutation_chain(legacy, 100, seed=7)


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


def test_genome_json_round_trip(family, legacy, chain100, legacy100) -> None:
    for p in [family.initial(), *chain100[::10], chain100[-1], legacy.initial(), *legacy100[::10]]:
        q = EnvParams.from_json(p.to_json())
        assert q == p and q.id == p.id and q.to_json() == p.to_json()
        g = p["genome"]
        assert json.loads(json.dumps(g)) == g
        assert cppn._canonical(g) == g
    # genomes of the earlier format (bias node, no node bias/response) still load under the
    # default family, and nothing writes default keys into them: their ids stay put
    for p in legacy100[::10]:
        family.validate(p)
        assert '"bias":' not in p.to_json() and '"response"' not in p.to_json()
        assert EnvParams.from_json(p.to_json()).id == p.id


def test_evaluate_deterministic(chain100) -> None:
    g = chain100[-1]["genome"]
    xs = np.linspace(-4, 4, 301)
    a, b = cppn.evaluate(g, xs), cppn.evaluate(copy.deepcopy(g), xs.copy())
    assert a.dtype == np.float64 and a.shape == xs.shape and np.array_equal(a, b)
    # pointwise: evaluating one x at a time gives the same numbers
    assert np.array_equal(a[::50], np.array([cppn.evaluate(g, np.array([x]))[0] for x in xs[::50]]))
    # flat-style genome: w * x + b through the bias node
    g0 = cppn.flat_genome(weight=0.5, bias_weight=0.25)
    assert np.allclose(cppn.evaluate(g0, xs), 0.5 * xs + 0.25)
    # reference-style genome: node bias and response
    g1 = cppn.reference_genome(weight=0.5, bias=0.25, response=2.0)
    assert np.allclose(cppn.evaluate(g1, xs), 0.25 + 2.0 * 0.5 * xs)


def test_mutation_reproducible_valid_and_changes(family, chain100) -> None:
    """Reference validity: the input reaches the output over all connections, the genome
    changed, and the rise over the reference's x grid is in (0, 16] after the rescale."""
    again = mutation_chain(family, 100, seed=7)
    assert [p.id for p in again] == [p.id for p in chain100]
    assert [p.id for p in mutation_chain(family, 5, seed=8)] != [p.id for p in chain100[:5]]
    parent = family.initial()
    for child in chain100:
        g = child["genome"]
        family.validate(child)  # includes the acyclic check
        assert cppn.input_reaches_output(g, enabled_only=False)
        assert cppn.neat_evaluates_output(g)
        assert cppn._topo_order([n["id"] for n in g["nodes"]], cppn._pairs(g)) is not None
        assert all(n["kind"] != "bias" for n in g["nodes"])
        y = cppn.evaluate(g, cppn.REFERENCE_X)
        assert AMPLITUDE_MIN - 1e-9 <= np.max(y - y[0]) <= AMPLITUDE_MAX + 1e-9
        assert child.id != parent.id
        parent = child
    assert max(cppn.num_hidden(p["genome"]) for p in chain100) > 0  # structure does grow


def test_legacy_mutation_reproducible_valid_and_changes(legacy, legacy100) -> None:
    """Options extended/normalised/flat: the earlier scheme, whose children always move the ground."""
    again = mutation_chain(legacy, 100, seed=7)
    assert [p.id for p in again] == [p.id for p in legacy100]
    parent = legacy.initial()
    for child in legacy100:
        g = child["genome"]
        legacy.validate(child)
        assert cppn.input_reaches_output(g)
        diff = np.max(np.abs(legacy.ground(child) - legacy.ground(parent)))
        assert diff > 1e-6
        assert child.id != parent.id
        parent = child
    assert max(cppn.num_hidden(p["genome"]) for p in legacy100) > 0


def test_options_validated_and_passed_through_the_registry() -> None:
    for option, bad in (("operators", "neat"), ("amplitude", "raw"), ("initial", "zero")):
        with pytest.raises(ValueError, match=option):
            envs.make_family("bipedal_cppn", {option: bad})
    fam = envs.make_family("bipedal_cppn", LEGACY)
    assert (fam.operators, fam.amplitude, fam.initial_style) == ("extended", "normalised", "flat")
    default = envs.make_family("bipedal_cppn")
    assert (default.operators, default.amplitude, default.initial_style) == ("reference",) * 3
    assert fam.initial()["genome"] == cppn.flat_genome()


def test_ground_shape(family, legacy, chain100, legacy100) -> None:
    flat = legacy.ground(legacy.initial())
    assert np.all(flat == TERRAIN_HEIGHT)
    start = family.ground(family.initial())  # the reference's start: a slope
    assert np.all(start[: TERRAIN_STARTPAD + 2] == TERRAIN_HEIGHT) and np.max(np.abs(start - TERRAIN_HEIGHT)) > 0
    for fam, chain in ((family, chain100), (legacy, legacy100)):
        for p in chain[::7]:
            y = fam.ground(p)
            assert np.all(y[: TERRAIN_STARTPAD + 2] == TERRAIN_HEIGHT)  # flat pad, continuous join
            if fam is legacy:
                assert np.max(np.abs(y - TERRAIN_HEIGHT)) <= AMPLITUDE_MAX + 1e-9
            else:  # no rescaling of the ground itself
                raw = cppn.evaluate(p["genome"], CPPN_X)
                assert np.array_equal(y[TERRAIN_STARTPAD + 1 :], TERRAIN_HEIGHT + (raw - raw[0]))
            f = fam.features(p)
            assert f.dtype == np.float64 and f.shape == (20,)
            flat_cols = fam.flat(p)
            assert all(isinstance(v, float) for v in flat_cols.values())


def _bad(genome_edit) -> EnvParams:
    g = cppn.flat_genome(weight=0.3)
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
            {
                "nodes": [],
                "connections": g["connections"]
                + [
                    {"in": 1, "out": 2, "weight": 1.0, "enabled": True},
                    {"in": 2, "out": 1, "weight": 1.0, "enabled": False},
                ],
            }
        )["connections"]

    def no_output(g):
        g["nodes"][:] = [n for n in g["nodes"] if n["kind"] != "output"]
        g["connections"][:] = [c for c in g["connections"] if c["out"] != 0]

    def weight(g):
        g["connections"][0]["weight"] = 50.0

    def bias(g):
        g["nodes"][2]["bias"] = 10.5

    def response(g):
        g["nodes"][3]["response"] = "1"

    def input_bias(g):
        g["nodes"][1]["bias"] = 0.1

    cases = [
        (act, "genome.nodes[3].activation", "relu"),
        (dangling, "genome.connections[3].out", "dangling"),
        (cycle, "genome.connections", "cycle"),
        (no_output, "genome.nodes", "output"),
        (weight, "genome.connections[0].weight", ""),
        (bias, "genome.nodes[2].bias", "10"),
        (response, "genome.nodes[3].response", "finite"),
        (input_bias, "genome.nodes[1].bias", "input"),
    ]
    good = _bad(lambda g: g["nodes"][3].update(bias=-10.0, response=123.0))
    family.validate(good)
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
    profile = family.course_profile(chain100[-1], seed=0)  # what `poet profile` draws
    assert np.array_equal(profile.y, ground_heights(chain100[-1]["genome"])) and profile.seed is None
    assert family.course_profile(chain100[-1], seed=9).y.tolist() == profile.y.tolist()
    assert profile.description.startswith(f"{family.flat(chain100[-1])['hidden_nodes']:.0f} hidden nodes · ")


def test_poet_run_rebuilds_every_env_from_records(tmp_path) -> None:
    import poet
    import poet.analysis
    from tests.conftest import tiny_config

    cfg = tiny_config(
        env={"family": "bipedal_cppn", "options": {}},
        iterations=5,
        reproduction={"every": 2, "threshold": -1000.0, "mc_lower": -1000.0, "mc_upper": 1000.0},
        evaluation={"max_steps": 40, "eval_episodes": 1, "backend": "inprocess"},
        trainer={"name": "es", "es": {"population": 4, "noise_table_size": 200_000}},
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
        h = rebuilt[TERRAIN_STARTPAD + 1 :] - TERRAIN_HEIGHT
        for column, value in fam.flat(p).items():
            assert row[column] == value, column
        assert row["amplitude"] == float(np.max(np.abs(h)))
    roots = []
    for _, row in rows.iterrows():  # every child's genome differs from its parent's (the reference's test)
        parent = row["parent_env_id"]
        if isinstance(parent, str) and parent:
            assert by_id[row["env_id"]]["genome"] != by_id[parent]["genome"]
        else:
            roots.append(by_id[row["env_id"]])
    # the root is a reference start (POET draws it with `initial(rng)`): a random slope
    assert len(roots) == 1 and len(ids) >= 2
    g0 = roots[0]["genome"]
    assert [n["kind"] for n in g0["nodes"]] == ["input", "output"] and len(g0["connections"]) == 1
    assert g0["nodes"][1]["activation"] == "identity" and g0["nodes"][1]["response"] == 1.0
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
