"""Golden tests: each operator against numbers worked out by hand from the reference code.

The reference is uber-research/poet (master for Enhanced POET, the `original_poet` branch
for POET). Expected values are written out from its formulas (`es.py` `compute_grads`,
`optimizers.py` `Adam`, `poet_algo.py` `transfer` / `adjust_envs_niches`, `stats.py`
`compute_centered_ranks`, `model.py` `get_random_model_params`); none is obtained by
running our code a second time. The phases run on a fake scorer and trainer, so a test
sees exactly which evaluations a rule asks for.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from envs import EnvParams
from poet.context import RunContext
from poet.curricula.common import train_pairs
from poet.curricula.poet.novelty import pata_ec
from poet.curricula.poet.reproduction import Child, consider, reproduce
from poet.curricula.poet.transfer import transfer
from poet.evaluation import EvalResult, PolicyRef
from poet.pair import Pair
from poet.parts import load_config
from poet.policies import PolicySpec, init_flat
from poet.population import Population
from poet.records import RecordWriter
from poet.seeding import Seeds
from poet.state import RunState
from poet.trainers import TrainerContext, TrainStep
from poet.trainers.adam import adam_propose, adam_step
from poet.trainers.es import ESOptions, ESTrainer, es_gradient


# ======================================================================= ES
def test_es_gradient_divides_by_the_number_of_mirrored_pairs() -> None:
    # returns of N = 2 mirrored pairs, flattened [3, 1, 2, 0]: ranks [3, 1, 2, 0],
    # centred ranks r / (4 - 1) - 0.5 = [1/2, -1/6, 1/6, -1/2];
    # weights r+ - r- = [2/3, 2/3]; g = sum(w_i eps_i) / N / sigma = [2/3, 2/3] / 2 / 0.5
    returns = np.array([[3.0, 1.0], [2.0, 0.0]])
    noise = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    np.testing.assert_allclose(es_gradient(returns, noise, 0.5), [2 / 3, 2 / 3], rtol=1e-12)
    # three pairs, sigma 0.1: flat [5, 0, 1, 4, 2, 3] -> ranks [5, 0, 1, 4, 2, 3] / 5 - 0.5
    # = [0.5, -0.5, -0.3, 0.3, -0.1, 0.1]; w = [1.0, -0.6, -0.2]; g = w @ eps / 3 / 0.1
    returns = np.array([[5.0, 0.0], [1.0, 4.0], [2.0, 3.0]])
    noise = np.array([[1.0, 2.0], [0.5, -1.0], [0.0, 3.0]], dtype=np.float32)
    expected = np.array([1.0 * 1.0 - 0.6 * 0.5 - 0.2 * 0.0, 1.0 * 2.0 - 0.6 * -1.0 - 0.2 * 3.0]) / 3 / 0.1
    np.testing.assert_allclose(es_gradient(returns, noise, 0.1), expected, rtol=1e-6)
    np.testing.assert_allclose(expected, [7 / 3, 20 / 3], rtol=1e-12)


def test_es_defaults_are_the_reference_run_script() -> None:
    o = ESOptions()
    assert (o.population, o.sigma, o.sigma_decay, o.sigma_floor) == (512, 0.1, 0.999, 0.01)
    assert (o.lr, o.lr_decay, o.lr_floor, o.l2) == (0.01, 0.9999, 0.001, 0.01)
    assert (o.beta1, o.beta2, o.adam_eps) == (0.9, 0.999, 1e-8)
    assert o.propose_with == "adam"


STATE = {"t": 1, "m": np.array([0.1, -0.2], dtype=np.float32), "v": np.array([0.002, 0.01], dtype=np.float32)}
GRAD = np.array([0.5, -0.1], dtype=np.float32)


def test_adam_step_with_beta1_0_9_by_hand() -> None:
    # t = 2; m = 0.9 m + 0.1 g = [0.14, -0.19]; v = 0.999 v + 0.001 g^2 = [0.002248, 0.01]
    # a = 0.01 * sqrt(1 - 0.999^2) / (1 - 0.9^2) = 0.01 * sqrt(0.001999) / 0.19 = 0.00235321
    a = 0.01 * math.sqrt(0.001999) / 0.19
    expected = np.array([1.0 - a * 0.14 / (math.sqrt(0.002248) + 1e-8), 2.0 - a * -0.19 / (math.sqrt(0.01) + 1e-8)])
    theta, state = adam_step(np.array([1.0, 2.0], dtype=np.float32), GRAD, STATE, 0.01, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(theta, expected, rtol=1e-6)  # float32 arithmetic, as the reference
    np.testing.assert_allclose(theta, [0.9930516, 2.0044711], rtol=1e-6)
    assert state["t"] == 2
    np.testing.assert_allclose(state["m"], [0.14, -0.19], rtol=1e-6)
    np.testing.assert_allclose(state["v"], [0.002248, 0.01], rtol=1e-5)


def test_adam_propose_uses_current_t_and_commits_nothing() -> None:
    # Adam.propose: same moments, but a with the CURRENT t = 1: 0.01 * sqrt(0.001) / 0.1 = 0.00316228
    a = 0.01 * math.sqrt(1 - 0.999) / (1 - 0.9)
    expected = np.array([1.0 - a * 0.14 / (math.sqrt(0.002248) + 1e-8), 2.0 - a * -0.19 / (math.sqrt(0.01) + 1e-8)])
    before = {k: np.copy(v) for k, v in STATE.items()}
    theta = adam_propose(np.array([1.0, 2.0], dtype=np.float32), GRAD, STATE, 0.01, 0.9, 0.999, 1e-8)
    np.testing.assert_allclose(theta, expected, rtol=1e-6)
    np.testing.assert_allclose(theta, [0.9906625, 2.0060083], rtol=1e-6)
    for k in before:
        np.testing.assert_array_equal(STATE[k], before[k])
    with pytest.raises(ValueError, match="fresh state"):
        adam_propose(np.zeros(2, np.float32), GRAD, {**STATE, "t": 0}, 0.01, 0.9, 0.999, 1e-8)


class _UnitNoise:
    """Noise vector k is the k-th unit vector; offsets are handed out 0, 1, 2, ..."""

    def get(self, offset: int, dim: int) -> np.ndarray:
        return np.eye(dim, dtype=np.float32)[offset]

    def sample_offsets(self, rng, dim: int, count: int) -> np.ndarray:
        return np.arange(count)


class _ReturnsEvaluator:
    """Returns of perturbation (offset k, sign s) from a table; unperturbed requests score 7."""

    def __init__(self, table: dict[tuple[int, int], float]):
        self.table, self.weights = table, {}

    def put(self, weights):
        self.weights[len(self.weights)] = np.array(weights)
        return PolicyRef(str(len(self.weights) - 1))

    def release(self, refs) -> None:
        pass

    def evaluate(self, requests):
        out = []
        for r in requests:
            value = 7.0 if r.perturbation is None else self.table[(r.perturbation.offset, r.perturbation.sign)]
            out.append(EvalResult(returns=np.full(r.episodes, value), lengths=np.ones(r.episodes, dtype=np.int64)))
        return out


def _es(**options) -> ESTrainer:
    spec = PolicySpec(obs_dim=1, act_dim=1, hidden=(1,))
    return ESTrainer(
        ESOptions(**{"population": 4, **options}), TrainerContext(spec=spec, max_steps=10, noise=_UnitNoise())
    )


def _task(theta, state):
    from poet.trainers import TrainTask

    env = EnvParams.create("terrain", {"roughness": 0.0, "pit_gap": [], "stump_height": []})
    return TrainTask(key="p0", theta=np.array(theta, dtype=np.float32), env=env, state=state, seed=1)


ES_TABLE = {(0, 1): 3.0, (0, -1): 1.0, (1, 1): 2.0, (1, -1): 0.0}  # the first test's returns


def test_es_step_and_proposals_by_hand() -> None:
    # sigma 0.5: g = [2/3, 2/3] (first test); the minimised direction is -g + 0.01 theta.
    theta0 = [1.0, -2.0]
    state = {
        "t": 1,
        "m": np.array([0.1, 0.1], np.float32),
        "v": np.array([0.01, 0.01], np.float32),
        "lr": 0.01,
        "sigma": 0.5,
    }
    grad = np.array([-2 / 3 + 0.01 * 1.0, -2 / 3 + 0.01 * -2.0])
    m = 0.9 * 0.1 + 0.1 * grad
    v = 0.999 * 0.01 + 0.001 * grad**2
    trainer = _es()
    # the committed step: t = 2
    a2 = 0.01 * math.sqrt(1 - 0.999**2) / (1 - 0.9**2)
    (step,) = trainer.step([_task(theta0, state)], _ReturnsEvaluator(ES_TABLE))
    np.testing.assert_allclose(step.theta, np.array(theta0) - a2 * m / (np.sqrt(v) + 1e-8), rtol=1e-5)
    assert step.state["t"] == 2
    assert step.state["lr"] == pytest.approx(0.01 * 0.9999) and step.state["sigma"] == pytest.approx(0.5 * 0.999)
    # a transfer's proposal: Adam with the target's moments at its current t = 1, nothing committed
    a1 = 0.01 * math.sqrt(1 - 0.999) / (1 - 0.9)
    (proposed,) = trainer.propose([_task(theta0, state)], _ReturnsEvaluator(ES_TABLE))
    np.testing.assert_allclose(proposed, np.array(theta0) - a1 * m / (np.sqrt(v) + 1e-8), rtol=1e-5)
    assert state["t"] == 1 and state["lr"] == 0.01
    # child admission's proposal: plain SGD at the initial lr, theta - 0.01 * (-g + l2 theta)
    (plain,) = trainer.propose([_task(theta0, state)], _ReturnsEvaluator(ES_TABLE), plain=True)
    np.testing.assert_allclose(plain, np.array(theta0) - 0.01 * grad, rtol=1e-6)
    np.testing.assert_allclose(plain, [1.0065667, -1.9931333], rtol=1e-6)
    # ours: a fresh state (t = 0, where the reference's Adam.propose divides by zero) steps plainly
    (fresh,) = trainer.propose([_task(theta0, {**state, "t": 0})], _ReturnsEvaluator(ES_TABLE))
    np.testing.assert_array_equal(fresh, plain)


def test_reference_init_is_iid_normal_0_1() -> None:
    spec = PolicySpec(obs_dim=24, act_dim=4, hidden=(40, 40))
    expected = np.random.default_rng(5).standard_normal(spec.num_params) * 0.1  # get_random_model_params
    theta = init_flat(spec, np.random.default_rng(5))
    np.testing.assert_allclose(theta, expected.astype(np.float32))
    assert theta.size == 24 * 40 + 40 + 40 * 40 + 40 + 40 * 4 + 4
    assert abs(float(theta.std()) - 0.1) < 0.005 and np.count_nonzero(theta) == theta.size  # biases random too


# ===================================================================== PATA-EC
def test_pata_ec_ties_ordinal_by_position_and_average() -> None:
    # clip [400, 30, 30, 10, 340] to [25, 340]: [340, 30, 30, 25, 340]
    # ordinal (stable argsort): ranks [3, 1, 2, 0, 4] / 4 - 0.5
    scores = np.array([400.0, 30.0, 30.0, 10.0, 340.0])
    np.testing.assert_allclose(pata_ec(scores, 25, 340), [0.25, -0.25, 0.0, -0.5, 0.5])
    # average: ranks [3.5, 1.5, 1.5, 0, 3.5] / 4 - 0.5
    np.testing.assert_allclose(pata_ec(scores, 25, 340, "average"), [0.375, -0.125, -0.125, -0.5, 0.375])


# =================================================== fake services for the phases
@dataclass
class FakeScorer:
    """Scores from a table keyed by (theta as a tuple, env params without course seed); records what was asked."""

    table: dict[tuple[tuple[float, ...], str], float]
    asked: list[tuple[tuple[float, ...], str]] = field(default_factory=list)
    cache: Any = None

    def score(self, jobs, tags=None) -> np.ndarray:
        out = []
        for theta, env in jobs:
            key = (tuple(float(x) for x in np.asarray(theta).ravel()), env.with_course_seed(None).id)
            self.asked.append(key)
            out.append(self.table[key])
        return np.array(out, dtype=np.float64)


class FakeTrainer:
    """A proposal adds `offset` to theta (100 for transfers, 0.5 for child admission); records tasks."""

    name = "fake"

    def __init__(self) -> None:
        self.proposed: list[tuple[tuple[float, ...], str, Any, bool]] = []

    def init_state(self, theta):
        return {"fresh": True}

    def reset_state(self, state, theta):
        return {"reset": True}

    def step(self, tasks, evaluator):
        return [TrainStep(theta=t.theta + 1, state={"stepped": True}, score=None, metrics={}) for t in tasks]

    def propose(self, tasks, evaluator, plain=False):
        for t in tasks:
            self.proposed.append((tuple(float(x) for x in t.theta), t.env.id, t.state, plain))
        return [t.theta + (0.5 if plain else 100.0) for t in tasks]


def env(name: str, course_seed: int | None = None) -> EnvParams:
    return EnvParams.create("fake", {"name": name}, course_seed)


def pair(index: int, theta: float, e: EnvParams, scores=(), state=None) -> Pair:
    return Pair(
        pair_id=f"p{index}",
        index=index,
        env=e,
        theta=np.array([theta], dtype=np.float32),
        state=state if state is not None else {"own": index},
        parent_env_id=None,
        created_iteration=0,
        scores=list(scores),
    )


class FakeFamily:
    name = "fake"

    def __init__(self, children: list[EnvParams], features: dict[str, list[float]]):
        self.children, self.feature_of = list(children), features

    def mutate(self, params, rng):
        return self.children.pop(0)

    def features(self, params):
        return np.array(self.feature_of[params["name"]], dtype=np.float64)

    def flat(self, params):
        return {}


def make_ctx(tmp_path, pairs: list[Pair], table, archive=(), family=None, **sections) -> RunContext:
    """Fake services around a RunState holding `pairs` (active) and `archive`."""
    population = Population(active=list(pairs), archive=list(archive), next_index=len(pairs) + len(archive))
    return RunContext(
        cfg=load_config(data=sections),
        family=family,
        spec=None,
        trainer=FakeTrainer(),
        evaluator=None,
        seeds=Seeds(0),
        scorer=FakeScorer(table),
        records=RecordWriter(tmp_path),
        log=lambda line: None,
        state=RunState(population=population),
    )


def k(theta: float, e: EnvParams) -> tuple[tuple[float, ...], str]:
    return ((float(np.float32(theta)),), e.with_course_seed(None).id)


# ================================================================= transfer
EA, EB, EC = env("A"), env("B"), env("C")
TRANSFER_TABLE = {
    # incumbents on their own env
    k(1, EA): 140.0,
    k(2, EB): 200.0,
    k(3, EC): 240.0,
    # direct: source theta on the target env
    k(2, EA): 160.0,
    k(3, EA): 149.0,
    k(1, EB): 250.0,
    k(3, EB): 260.0,
    k(1, EC): 300.0,
    k(2, EC): 300.0,
    # fine-tuned (+100) on the target env
    k(102, EA): 155.0,
    k(103, EA): 170.0,
    k(101, EB): 190.0,
    k(103, EB): 199.0,
    k(101, EC): 280.0,
    k(102, EC): 280.0,
}


def _transfer_pairs(a_history=(100, 150, 120, 130, 140)):
    return [pair(0, 1, EA, scores=list(a_history)), pair(1, 2, EB, scores=[200]), pair(2, 3, EC, scores=[250, 240])]


def test_enhanced_transfer_decision_by_hand(tmp_path) -> None:
    pairs = _transfer_pairs()
    ctx = make_ctx(tmp_path, pairs, TRANSFER_TABLE)
    summary = transfer(ctx, 25, enhanced=True)
    # bars: A max(last 5) = 150, B 200, C 250. Proposals only where direct > bar:
    # on A only from p1 (160 > 150; 149 is not), on B from p0 and p2, on C from p0 and p1.
    proposed = {(src[0], tgt) for src, tgt, _, _ in ctx.trainer.proposed}
    assert proposed == {(2.0, EA.id), (1.0, EB.id), (3.0, EB.id), (1.0, EC.id), (2.0, EC.id)}
    # each proposal steps with the TARGET's state
    for _, tgt, state, plain in ctx.trainer.proposed:
        assert state == {EA.id: {"own": 0}, EB.id: {"own": 1}, EC.id: {"own": 2}}[tgt] and not plain
    # A: 155 > 150 -> accepted (fine-tuned p1). B: 190, 199 <= 200 -> incumbent kept although
    # the direct scores 250 and 260 beat the bar. C: 280 = 280 -> the first source, p0.
    accepted = {(c.target.pair_id, c.source.pair_id, c.kind, c.score) for c in summary.accepted}
    assert accepted == {("p0", "p1", "fine_tune", 155.0), ("p2", "p0", "fine_tune", 280.0)}
    np.testing.assert_array_equal(pairs[0].theta, [102.0])
    np.testing.assert_array_equal(pairs[1].theta, [2.0])
    np.testing.assert_array_equal(pairs[2].theta, [101.0])
    assert pairs[0].state == {"reset": True} and pairs[1].state == {"own": 1} and pairs[2].state == {"reset": True}


def test_poet_transfer_decision_by_hand(tmp_path) -> None:
    pairs = _transfer_pairs(a_history=(100, 175, 120, 130, 140))  # POET ignores the 175
    ctx = make_ctx(tmp_path, pairs, TRANSFER_TABLE)
    summary = transfer(ctx, 25, enhanced=False)
    # original POET: every source direct and fine-tuned; best of all beats the incumbent's score.
    assert len(ctx.trainer.proposed) == 6
    # A (140): best is p2 fine-tuned 170. B (200): p2 direct 260. C (240): 300 twice -> p0 direct first.
    accepted = {(c.target.pair_id, c.source.pair_id, c.kind, c.score) for c in summary.accepted}
    assert accepted == {("p0", "p2", "fine_tune", 170.0), ("p1", "p2", "direct", 260.0), ("p2", "p0", "direct", 300.0)}


# ============================================================ child admission
def test_child_admission_order_and_second_mc_check(tmp_path) -> None:
    e0 = env("root")
    c1, c2, c3, c4 = env("c1"), env("c2"), env("c3"), env("c4")
    # hand-designed novelty vs the one admitted env (feature 0): c1 3, c2 2, c3 1 (c4 fails the MC)
    family = FakeFamily([c1, c2, c3, c4], {"root": [0.0], "c1": [3.0], "c2": [2.0], "c3": [1.0], "c4": [9.0]})
    table = {
        k(5, e0): 250.0,  # the parent is eligible (>= 200)
        # the MC with the parent's agent: c4 is too easy (> 340), the others pass
        k(5, c1): 100.0,
        k(5, c2): 100.0,
        k(5, c3): 100.0,
        k(5, c4): 400.0,
        # evaluate_transfer: the best of the active agent directly (100) and fine-tuned (+0.5)
        k(5.5, c1): 400.0,  # c1, the most novel: best 400 fails the second MC check (too easy)
        k(5.5, c2): 300.0,  # c2: best is the fine-tuned agent, 300: admitted with it
    }
    ctx = make_ctx(
        tmp_path,
        [pair(0, 5, e0)],
        table,
        family=family,
        reproduction={"every": 1, "max_children": 4, "max_admitted": 1, "threshold": 200},
    )
    summary = reproduce(ctx, 150, enhanced=False)
    assert [c.env.with_course_seed(None) for c in summary.children] == [c1, c2, c3, c4]
    seeds = [c.env.course_seed for c in summary.children]  # each child's own course, from the run's streams
    assert all(isinstance(x, int) for x in seeds) and len(set(seeds)) == 4
    assert [c.passed_mc for c in summary.children] == [True, True, True, False]
    assert summary.admitted == ["p1"]
    new = ctx.state.population.get("p1")
    assert new.env == summary.children[1].env
    np.testing.assert_array_equal(new.theta, [5.5])  # the fine-tuned agent, not the parent's
    asked = ctx.scorer.asked
    assert asked.index(k(5.5, c1)) < asked.index(k(5.5, c2))  # novelty order
    assert k(5.5, c3) not in asked  # max_admitted reached: c3 is never considered
    assert summary.children[0].transfer_score == 400.0 and summary.children[0].admitted_as is None
    # proposals for the child are plain SGD steps from fresh states
    assert all(plain and state == {"fresh": True} for _, _, state, plain in ctx.trainer.proposed)


def test_child_agent_parent_option_skips_the_second_check(tmp_path) -> None:
    e0, c1 = env("root"), env("c1")
    family = FakeFamily([c1], {"root": [0.0], "c1": [3.0]})
    table = {k(5, e0): 250.0, k(5, c1): 100.0}
    ctx = make_ctx(
        tmp_path,
        [pair(0, 5, e0)],
        table,
        family=family,
        reproduction={"every": 1, "max_children": 1, "max_admitted": 1, "threshold": 200, "child_agent": "parent"},
    )
    assert reproduce(ctx, 150, enhanced=False).admitted == ["p1"]
    np.testing.assert_array_equal(ctx.state.population.get("p1").theta, [5.0])
    assert ctx.trainer.proposed == []


@pytest.mark.parametrize("archived_score, counted", [(100.0, True), (10.0, False), (None, False)])
def test_reference_annecs_counts_the_best_archived_agent(tmp_path, archived_score, counted) -> None:
    e0, eold, c = env("root"), env("old"), env("c", 3)
    table = {k(5, c): 200.0, k(5.5, c): 210.0}
    archive = []
    if archived_score is not None:
        archive = [pair(7, 9, eold)]
        archive[0].retired_iteration = 100
        table[k(9, c)] = archived_score
    ctx = make_ctx(tmp_path, [pair(0, 5, e0)], table, archive=archive, family=FakeFamily([], {}))
    child = Child(parent=ctx.state.population.active[0], env=c, mc_score=200.0, passed_mc=True)
    admitted = consider(ctx, child, 150, enhanced=True)
    assert admitted is not None and ctx.state.annecs_reference == int(counted)


# =============================================================== score timing
def test_pair_score_is_taken_after_the_step(tmp_path) -> None:
    e0 = env("root")
    table = {k(5, e0): 50.0, k(6, e0): 60.0}  # the trainer's step adds 1
    ctx = make_ctx(tmp_path, [pair(0, 5, e0)], table)
    train_pairs(ctx, 0)
    assert ctx.state.population.active[0].scores == [60.0]
    ctx.records.flush()
    rows = [json.loads(line) for line in (tmp_path / "records" / "iterations.jsonl").read_text().splitlines()]
    assert rows[0]["score"] == 60.0


# ===================================================================== ANNECS
def test_both_annecs_counters_on_a_constructed_history(tmp_path) -> None:
    from poet.analysis import load_run

    w = RecordWriter(tmp_path)
    for it in range(60):
        w.write("iterations", {"iteration": it, "pair_id": "p0", "env_id": "e0", "score": 0.0})
    # e0 initial; e1 admitted at 10 (archived agent failed the MC), solved at 30;
    # e2 admitted at 20 (archived agent passed), never solved; e3 admitted at 40 (passed), solved at 50
    for env_id, parent, created in (("e0", None, 0), ("e1", "e0", 10), ("e2", "e0", 20), ("e3", "e1", 40)):
        w.write(
            "envs",
            {
                "env_id": env_id,
                "family": "fake",
                "pair_id": env_id,
                "parent_env_id": parent,
                "created_iteration": created,
            },
        )
        if parent is not None:
            w.write(
                "events",
                {
                    "iteration": created,
                    "kind": "admitted",
                    "pair_id": env_id,
                    "env_id": env_id,
                    "detail": json.dumps({"annecs_reference": env_id != "e1"}),
                },
            )
    for env_id, it in (("e0", 5), ("e1", 30), ("e3", 50)):
        w.write("events", {"iteration": it, "kind": "solved", "pair_id": env_id, "env_id": env_id, "detail": ""})
    w.close()
    run = load_run(tmp_path)
    # the paper's: created by reproduction and solved (e1 at 30, e3 at 50; the initial e0 never counts)
    assert run.annecs[[0, 29, 30, 49, 50, 59]].tolist() == [0, 0, 1, 1, 2, 2]
    # the reference code's: +1 at admission when the best archived agent passed (e2 at 20, e3 at 40)
    assert run.annecs_reference[[0, 19, 20, 39, 40, 59]].tolist() == [0, 0, 1, 1, 2, 2]


# ==================================================================== courses
def test_fixed_course_runs_every_episode_on_the_env_seed() -> None:
    from envs import make_family
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.policies import spec_for_spaces

    family = make_family("terrain", {"course_length": 20.0, "max_episode_steps": 100})
    probe = family.make_env(family.initial())
    spec = spec_for_spaces(probe.observation_space, probe.action_space, (8,), "tanh")
    ev = InProcessEvaluator(family, spec, None)
    ref = ev.put(init_flat(spec, np.random.default_rng(0)) * 10)
    rough = family.initial().replace(roughness=3.0)
    pinned = rough.with_course_seed(1234)
    fixed, free = ev.evaluate([EvalRequest(ref, pinned, 3, 1, 100), EvalRequest(ref, rough, 3, 1, 100)])
    # the pinned env: three identical episodes, each the episode of seed 1234 whatever the request's seed
    import torch

    from poet.policies.mlp_torch import MLPPolicy, to_actions

    policy = MLPPolicy(spec)
    policy.load_flat(init_flat(spec, np.random.default_rng(0)) * 10)
    env = family.make_env(rough)
    obs, _ = env.reset(seed=1234)
    total, done = 0.0, False
    while not done:
        raw = policy(torch.as_tensor(np.asarray(obs, dtype=np.float32)).reshape(1, -1))
        obs, r, term, trunc, _ = env.step(to_actions(spec, raw.detach())[0])
        total, done = total + float(r), term or trunc
    assert fixed.returns.tolist() == pytest.approx([total] * 3, abs=1e-4)  # batched vs single forward
    (other_seed,) = ev.evaluate([EvalRequest(ref, pinned, 3, 99, 100)])
    assert other_seed.returns.tolist() == fixed.returns.tolist()
    # per_episode: each episode its own course
    assert len(set(free.returns.tolist())) > 1 and max(abs(free.returns - total)) > 1e-2
    assert pinned.to_dict()["course_seed"] == 1234 and EnvParams.from_json(pinned.to_json()) == pinned
    assert pinned.id != rough.id and rough.to_dict().keys() == {"family", "values"}
