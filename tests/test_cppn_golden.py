"""Golden pins of the CPPN terrain against the Enhanced POET reference, computed by hand.

Reference: uber-research/poet master, `poet_distributed/niches/box2d/cppn.py`
(`CppnEnvParams`, `is_genome_valid`), `config-cppn` and `bipedal_walker_custom.py`
(`_generate_terrain`), with neat-python 0.92's DefaultGenome. The expected numbers below
come from those formulas written out here (or from a copy of the test's own Generator,
replaying the documented draw order), never from a second call of our code. The defaults
are what is pinned: the tests call `cppn.mutate`, `cppn.mutate_once`,
`cppn.initial_genome` and the family without naming the options.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import envs
from envs import cppn
from envs.base import EnvParams

H = 400 / 30.0 / 4  # TERRAIN_HEIGHT = VIEWPORT_H / SCALE / 4
PAD = 20  # TERRAIN_STARTPAD
X_REF = np.array([(i - 100) / 100.0 for i in range(200)])  # CppnEnvParams.x


def _node(nid, kind, act="identity", **extra):
    return {"id": nid, "kind": kind, "activation": act, **extra}


def _conn(a, b, w, enabled=True):
    return {"in": a, "out": b, "weight": w, "enabled": enabled}


def _ref(weight, bias=0.0, response=1.0):
    return {
        "nodes": [_node(-1, "input"), _node(0, "output", bias=bias, response=response)],
        "connections": [_conn(-1, 0, weight)],
    }


def _by_pair(g):
    return {(c["in"], c["out"]): c for c in g["connections"]}


def _by_id(g):
    return {n["id"]: n for n in g["nodes"]}


# ================================================================ evaluation
def test_node_output_is_activation_of_bias_plus_response_times_sum() -> None:
    """neat: v = act(bias + response * sum(w * in)) over enabled connections only."""
    g = {
        "nodes": [
            _node(-1, "input"),
            _node(0, "output", "identity", bias=-0.1, response=2.0),
            _node(1, "hidden", "tanh", bias=0.2, response=0.5),
            _node(2, "hidden", "sin", bias=0.05, response=1.0),
        ],
        "connections": [
            _conn(-1, 0, -0.5),
            _conn(-1, 1, 1.5),
            _conn(-1, 2, 1.0),
            _conn(1, 0, 0.8),
            _conn(2, 0, 3.0, enabled=False),
        ],
    }
    cppn.validate_genome(g)
    # x = 0.4: h1 = tanh(2.5 * (0.2 + 0.5 * 1.5 * 0.4)) = tanh(1.25) = 0.8482836399575129
    #          out = -0.1 + 2 * (-0.5 * 0.4 + 0.8 * h1) = 0.8572538239320207
    # x = -1:  h1 = tanh(2.5 * (0.2 - 0.75)) = tanh(-1.375) = -0.8798266996519848
    #          out = -0.1 + 2 * (0.5 + 0.8 * h1) = -0.5077227194431758
    y = cppn.evaluate(g, np.array([0.4, -1.0]))
    assert y == pytest.approx([0.8572538239320207, -0.5077227194431758], abs=1e-12)
    # sigmoid output: 1 / (1 + exp(-5 * 0.8572538239320207)) = 0.9864305117115648
    g["nodes"][1]["activation"] = "sigmoid"
    assert cppn.evaluate(g, np.array([0.4]))[0] == pytest.approx(0.9864305117115648, abs=1e-12)


def test_old_format_genome_sums_only_and_keeps_its_id() -> None:
    """Genomes of earlier runs (bias node -2, no node bias/response) evaluate and hash as before."""
    g = {
        "nodes": [_node(-2, "bias"), _node(-1, "input"), _node(0, "output"), _node(1, "hidden", "square")],
        "connections": [_conn(-2, 0, 0.25), _conn(-1, 0, 0.5), _conn(-1, 1, 2.0), _conn(1, 0, -0.3)],
    }
    cppn.validate_genome(g)
    # x = 0.4: 0.25 * 1 + 0.5 * 0.4 + (-0.3) * (2 * 0.4) ** 2 = 0.25 + 0.2 - 0.192 = 0.258
    assert cppn.evaluate(g, np.array([0.4]))[0] == pytest.approx(0.258, abs=1e-12)
    # the flat start of earlier versions keeps the id it had (recorded from that version)
    old = {
        "nodes": [_node(-2, "bias"), _node(-1, "input"), _node(0, "output")],
        "connections": [_conn(-2, 0, 0.0), _conn(-1, 0, 0.0)],
    }
    params = EnvParams.create("bipedal_cppn", {"genome": old})
    envs.make_family("bipedal_cppn").validate(params)  # the default family loads old genomes
    assert params.id == "b1d2b5dbee2bf4a6"
    assert cppn._canonical(old) == old and "bias" not in old["nodes"][2]


# ==================================================================== start
def test_initial_genome_is_the_reference_random_slope() -> None:
    """configure_new: output bias N(0, 0.1) then weight N(0, 0.25), identity output, no bias node."""
    rng, replay = np.random.default_rng(42), np.random.default_rng(42)
    b = replay.normal(0.0, 0.1)
    w = replay.normal(0.0, 0.25)
    expected = {
        "nodes": [_node(-1, "input"), _node(0, "output", "identity", bias=b, response=1.0)],
        "connections": [_conn(-1, 0, w)],
    }
    fam = envs.make_family("bipedal_cppn")
    start = fam.initial(rng)
    assert start["genome"] == expected
    assert cppn.initial_genome(np.random.default_rng(42)) == expected
    # rng None: a fixed PCG64(0) Generator, whose first two normals are 0.12573022109339330
    # and -0.13210486329130188 (times 0.1 and 0.25)
    assert fam.initial()["genome"] == _ref(-0.03302621582282547, 0.01257302210933933)
    # the ground is that slope: y = H + w * (x_ - x_0), x_ = (i - 100) * pi / 100, not flat
    i = np.arange(PAD + 1, 200)
    ground = fam.ground(start)
    assert np.all(ground[: PAD + 1] == H)
    assert ground[PAD + 1 :] == pytest.approx(H + w * (i - (PAD + 1)) * np.pi / 100, abs=1e-12)
    assert np.max(np.abs(ground - H)) == pytest.approx(abs(w) * 1.78 * np.pi, rel=1e-9) and w != 0


# =================================================================== ground
@pytest.mark.parametrize("weight, amplitude", [(5.0, 27.96017461694916), (0.01, 0.05592034923389832)])
def test_reference_ground_is_not_rescaled(weight: float, amplitude: float) -> None:
    """_generate_terrain: y = H + cppn(x_) - cppn(x_ at step 21); amplitude 178 * pi / 100 * w,
    outside [0.25, 16] and kept (our 'normalised' option would give 16 and 0.25)."""
    fam = envs.make_family("bipedal_cppn")
    params = EnvParams.create("bipedal_cppn", {"genome": _ref(weight, bias=0.3)})
    env = fam.make_env(params)
    env.reset(seed=0)
    y = np.array(env.terrain_y)
    env.close()
    assert np.all(y[: PAD + 1] == H) and y[PAD + 1] == H
    assert np.max(y) - H == pytest.approx(amplitude, rel=1e-9)
    assert fam.flat(params)["amplitude"] == pytest.approx(amplitude, rel=1e-9)


# ================================================================= mutation
@pytest.mark.parametrize("w0, low", [(0.05, True), (9.0, False)])
def test_response_rescale_by_hand(w0: float, low: bool) -> None:
    """get_mutated_params: threshold = |max(y - y[0])| over x_i = (i - 100) / 100;
    < 0.25: response = (u / 2 + 0.25) / threshold; > 16: response = (4u + 12) / threshold."""
    rng, replay = np.random.default_rng(0), np.random.default_rng(0)
    # replay the draws: structural r, then per connection (r, normal), per node
    # (bias r, normal, response r), then u for the rescale
    r_struct = replay.random()
    assert r_struct >= 0.175  # no structural mutation on this draw
    assert replay.random() < 0.75
    w = w0 + replay.normal(0.0, 0.1)
    assert replay.random() < 0.75
    b = 0.0 + replay.normal(0.0, 0.1)
    replay.random()  # response: rate 0, unchanged
    threshold = 1.99 * w  # identity output b + w x: max rise at x = 0.99 from x = -1
    u = replay.random()
    if low:
        assert threshold < 0.25
        response = (u / 2 + 0.25) / threshold  # u = 0.6066357757671799: rise 0.5533
    else:
        assert threshold > 16
        response = (u * 4 + 12) / threshold
    child = cppn.mutate(_ref(w0), rng)
    assert child["connections"] == [_conn(-1, 0, w)]
    out = _by_id(child)[0]
    assert out["bias"] == b
    assert out["response"] == pytest.approx(response, rel=1e-12)
    y = cppn.evaluate(child, X_REF)
    rise = np.max(y - y[0])
    assert (0.25 <= rise < 0.75) if low else (12 <= rise < 16)
    assert rng.random() == replay.random()  # nothing else was drawn


def test_response_reset_to_one_before_mutation() -> None:
    """mutated.nodes[0].response = 1.0 before mutate: a parent response of 7 never survives."""
    rng = np.random.default_rng(1)
    kept = 0
    for _ in range(200):
        child = cppn.mutate(_ref(1.0, response=7.0), rng)
        out = _by_id(child)[0]
        unit = {**child, "nodes": [{**n, "response": 1.0} if n["id"] == 0 else n for n in child["nodes"]]}
        y = cppn.evaluate(unit, X_REF)
        threshold = abs(np.max(y - y[0]))
        if 0.25 <= threshold <= 16:
            assert out["response"] == 1.0
            kept += 1
        else:  # rescaled from 1.0: the rise lands in [0.25, 0.75) or [12, 16)
            rise = out["response"] * threshold
            assert 0.25 - 1e-9 <= rise < 0.75 or 12 - 1e-9 <= rise < 16
    assert kept > 150  # w near 1: the rise 1.99 w is in the window for plain lines


def test_threshold_is_the_rise_above_the_first_point() -> None:
    """threshold = abs(max(y - y[0])): a falling line (rise 0) is never a valid child."""
    rng = np.random.default_rng(2)
    lines = 0
    for _ in range(300):
        child = cppn.mutate(_ref(-0.05), rng)
        y = cppn.evaluate(child, X_REF)
        assert np.max(y - y[0]) > 0
        if cppn.num_hidden(child) == 0:
            lines += 1
            assert child["connections"][0]["weight"] > 0
    assert lines > 100  # most children are still lines: P(w' > 0) = 0.75 * P(N(0, .1) > .05) per draw


def test_reference_mutation_rates() -> None:
    """config-cppn: node add 0.1, node delete 0.075, weight and bias rate 0.75 (power 0.1),
    response and activation never, no connection added except by add-node, no bias node."""
    parent = {
        "nodes": [
            _node(-1, "input"),
            _node(0, "output", bias=0.0, response=1.0),
            _node(1, "hidden", "sin", bias=0.1, response=1.0),
        ],
        "connections": [_conn(-1, 0, 0.3), _conn(-1, 1, 1.0), _conn(1, 0, 0.7)],
    }
    pc, pn = _by_pair(parent), _by_id(parent)
    rng = np.random.default_rng(5)
    n = 4000
    adds = deletes = 0
    w_changed, w_total, w_deltas = 0, 0, []
    b_changed, b_total, b_deltas = 0, 0, []
    new_biases, new_acts = [], set()
    for _ in range(n):
        child = cppn.mutate_once(parent, rng)
        cppn.validate_genome(child)
        cc, cn = _by_pair(child), _by_id(child)
        assert all(node["kind"] != "bias" for node in child["nodes"])
        new_ids = set(cn) - set(pn)
        if new_ids:
            adds += 1
            (new,) = new_ids
            new_biases.append(cn[new]["bias"])
            new_acts.add(cn[new]["activation"])
            assert cn[new]["response"] == 1.0
            (a, _), (_, b) = sorted(p for p in cc if new in p)
            assert set(cc) - set(pc) == {(a, new), (new, b)} and not cc[(a, b)]["enabled"]
        else:
            assert set(cc) <= set(pc)  # never a new connection otherwise
        if 1 not in cn:
            deletes += 1
            assert set(cc) == {(-1, 0)}
        for key in set(pc) & set(cc):
            w_total += 1
            if cc[key]["weight"] != pc[key]["weight"]:
                w_changed += 1
                w_deltas.append(cc[key]["weight"] - pc[key]["weight"])
        for nid in set(pn) & set(cn):
            assert cn[nid]["activation"] == pn[nid]["activation"]
            if pn[nid]["kind"] == "input":
                continue
            assert cn[nid]["response"] == 1.0
            b_total += 1
            if cn[nid]["bias"] != pn[nid]["bias"]:
                b_changed += 1
                b_deltas.append(cn[nid]["bias"] - pn[nid]["bias"])
    assert adds / n == pytest.approx(0.1, abs=0.015)
    assert deletes / n == pytest.approx(0.075, abs=0.015)
    assert w_changed / w_total == pytest.approx(0.75, abs=0.02)
    assert b_changed / b_total == pytest.approx(0.75, abs=0.02)
    assert np.std(w_deltas) == pytest.approx(0.1, abs=0.01) and abs(np.mean(w_deltas)) < 0.01
    assert np.std(b_deltas) == pytest.approx(0.1, abs=0.01) and abs(np.mean(b_deltas)) < 0.01
    # a new node's bias: N(0, 0.1) at creation, then mutated at rate 0.75: sd sqrt(.01 + .75 * .01)
    assert np.std(new_biases) == pytest.approx(math.sqrt(0.01 + 0.75 * 0.01), abs=0.025)
    assert new_acts == set(cppn.ACTIVATIONS)


def test_add_node_splits_any_connection_enabled_or_not() -> None:
    """neat's mutate_add_node chooses among all connections, disabled ones included."""
    parent = {
        "nodes": [
            _node(-1, "input"),
            _node(0, "output", bias=0.0, response=1.0),
            _node(1, "hidden", "sin", bias=0.0, response=1.0),
        ],
        "connections": [_conn(-1, 0, 0.3, enabled=False), _conn(-1, 1, 1.0), _conn(1, 0, 0.7)],
    }
    rng = np.random.default_rng(6)
    split = {(-1, 0): 0, (-1, 1): 0, (1, 0): 0}
    for _ in range(4000):
        child = cppn.mutate_once(parent, rng)
        new = set(_by_id(child)) - set(_by_id(parent))
        if new:
            (nid,) = new
            pairs = sorted(p for p in _by_pair(child) if nid in p)
            split[(pairs[0][0], pairs[1][1])] += 1
    total = sum(split.values())
    assert total > 300
    for key in split:  # one third each
        assert split[key] / total == pytest.approx(1 / 3, abs=0.1), split


def test_child_may_differ_only_in_the_output_bias() -> None:
    """Validity is neat's distance > 0, not a changed ground: with an identity output a
    bias-only child keeps its parent's ground (raw rate 0.9 * 0.25 * 0.75 = 0.169 of draws,
    0.169 / 0.94 ~ 0.18 of children, the all-unchanged draws 0.9 * 0.25 * 0.25 being redrawn)."""
    rng = np.random.default_rng(3)
    parent = _ref(0.3, bias=0.0)
    same_ground = 0
    for _ in range(400):
        child = cppn.mutate(parent, rng)
        assert child != parent
        if cppn.num_hidden(child) == 0 and child["connections"][0]["weight"] == 0.3:
            assert _by_id(child)[0]["bias"] != 0.0
            y, y0 = cppn.evaluate(child, X_REF), cppn.evaluate(parent, X_REF)
            assert y - y[0] == pytest.approx(y0 - y0[0], abs=1e-12)
            same_ground += 1
    assert 0.12 <= same_ground / 400 <= 0.25


def test_child_may_keep_its_parents_output() -> None:
    """distance > 0 counts genes that do not reach the output: with the only connection out
    of node 1 disabled, a child that changes node 1 (its bias, its input weight, the
    disabled weight, or deletes it) and neither the output bias nor the weight x -> output
    (0.25 * 0.25 of draws) is valid, with its parent's output everywhere."""
    parent = {
        "nodes": [
            _node(-1, "input"),
            _node(0, "output", bias=0.0, response=1.0),
            _node(1, "hidden", "sin", bias=0.1, response=1.0),
        ],
        "connections": [_conn(-1, 0, 0.3), _conn(-1, 1, 1.0), _conn(1, 0, 0.7, enabled=False)],
    }
    rng = np.random.default_rng(9)
    same = 0
    for _ in range(400):
        child = cppn.mutate(parent, rng)
        assert child != parent
        if np.array_equal(cppn.evaluate(child, X_REF), cppn.evaluate(parent, X_REF)):
            same += 1
    assert 0.02 <= same / 400 <= 0.12


def test_output_neat_never_evaluates_is_invalid() -> None:
    """neat's FeedForwardNetwork skips a node without enabled inputs and everything after
    it, leaving the output at 0 (threshold 0): such a child is redrawn. Here node 1 has
    only a disabled input, so every child must delete it or re-feed it by a split."""
    parent = {
        "nodes": [
            _node(-1, "input"),
            _node(0, "output", bias=0.0, response=1.0),
            _node(1, "hidden", "identity", bias=0.5, response=1.0),
        ],
        "connections": [_conn(-1, 0, 0.3), _conn(-1, 1, 1.0, enabled=False), _conn(1, 0, 0.7)],
    }
    rng = np.random.default_rng(4)
    for _ in range(40):
        child = cppn.mutate(parent, rng)
        if 1 in _by_id(child):
            assert any(c["enabled"] for c in child["connections"] if c["out"] == 1)


def test_sole_disabled_connection_still_counts_for_reachability() -> None:
    """is_genome_valid walks all connection keys, enabled or not: a genome whose only
    connection is disabled has valid children, all made by splitting that connection."""
    parent = {
        "nodes": [_node(-1, "input"), _node(0, "output", bias=0.05, response=1.0)],
        "connections": [_conn(-1, 0, 0.4, enabled=False)],
    }
    rng = np.random.default_rng(8)
    for _ in range(20):
        child = cppn.mutate(parent, rng)
        cc = _by_pair(child)
        assert cppn.num_hidden(child) == 1 and not cc[(-1, 0)]["enabled"]
        assert {p for p, c in cc.items() if c["enabled"]} == {(-1, 1), (1, 0)}


def test_retry_cap_raises() -> None:
    """The reference retries forever; we stop after max_tries with a RuntimeError."""
    parent = {"nodes": [_node(-1, "input"), _node(0, "output", bias=0.0, response=1.0)], "connections": []}
    with pytest.raises(RuntimeError, match="in 30 tries"):
        cppn.mutate(parent, np.random.default_rng(0), max_tries=30)
