"""Where determinism ends: what gives the same numbers on every machine, pinned here by
numbers written down once (docs/getting-started.md#where-determinism-ends).

Same config and seed give the same tables on one machine whatever the workers, backend or
kill and resume (tests/test_run.py, tests/test_checkpoint.py). Across machines, the terrain
family's courses and its episodes under a policy hold bit for bit: numpy's PCG64 streams,
course generation, the compiled core and the compiled policy forward use only correctly
rounded IEEE operations in a fixed order (no fastmath, no fused multiply-add, an own tanh).
What is not pinned (BLAS's sums in ES's gradient, torch's kernels in PPO, Box2D) may differ
in the last bit on another CPU, and a run diverges from there.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import envs
from envs.base import EnvParams
from poet.evaluation import EvalRequest, InProcessEvaluator
from poet.policies import spec_for_spaces

LEVELS = [
    {"roughness": 0.0, "pit_gap": [], "stump_height": []},
    {"roughness": 4.5, "pit_gap": [], "stump_height": []},
    {"roughness": 2.0, "pit_gap": [3.0, 5.0], "stump_height": []},
    {"roughness": 1.0, "pit_gap": [2.0, 4.0], "stump_height": [1.0, 2.0]},
]
# sha256 (first 16 hex digits) of each level's course (seed 7): base, height, pit and stump arrays
COURSES = ["f5d30ee253b71d86", "b6688f2ca90860c8", "207fef2a223b0449", "b8ac24275d787c11"]
# returns (float.hex) and lengths of 2 episodes of 3 random 40-40 policies on each level, in
# the order policy 0 on levels 0-3, policy 1 on levels 0-3, policy 2 on levels 0-3
RETURNS = [
    ["0x1.2427816bdf8b9p+8", "0x1.2427816bdf8b9p+8"],
    ["0x1.5c9b329e14962p+6", "0x1.9fe57b510b9aap+5"],
    ["-0x1.d407e606c271dp+5", "-0x1.e2146388b20b3p+5"],
    ["-0x1.1c4473ea38178p+4", "-0x1.64a1687118542p+5"],
    ["0x1.27d0ba7dbe1b4p+8", "0x1.27d0ba7dbe1b4p+8"],
    ["0x1.e7b09799aff0dp+7", "0x1.ea6e17621aedbp+5"],
    ["-0x1.fec6dedb77533p+5", "0x1.a8bf7abf0cc9ap+4"],
    ["-0x1.99e2574f94420p+3", "-0x1.75c20e659dffdp+5"],
    ["-0x1.eb894ffae8df4p+2", "-0x1.eb894ffae8df4p+2"],
    ["-0x1.ce48eee2ec334p+2", "-0x1.d2d49523b15acp+2"],
    ["-0x1.c1496ac0b7f98p+2", "-0x1.dbdadfacacb36p+2"],
    ["-0x1.ddadf53917438p+2", "-0x1.ba7c57ea69b35p+2"],
]
LENGTHS = [
    [588, 588],
    [600, 600],
    [94, 105],
    [188, 129],
    [452, 452],
    [600, 600],
    [117, 600],
    [189, 136],
    [600, 600],
    [600, 600],
    [600, 600],
    [600, 600],
]


@pytest.fixture(scope="module")
def terrain():
    return envs.make_family("terrain")


@pytest.mark.parametrize("level", range(len(LEVELS)))
def test_terrain_courses_are_the_same_on_every_machine(terrain, level):
    course = terrain.course(EnvParams.create("terrain", LEVELS[level]), 7)
    arrays = (course.base, course.height, course.pit, course.stump)
    digest = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()[:16]
    assert digest == COURSES[level]


def test_terrain_episodes_under_a_policy_are_the_same_on_every_machine(terrain):
    env = terrain.make_env(terrain.initial())
    spec = spec_for_spaces(env.observation_space, env.action_space, (40, 40), "tanh")
    env.close()
    evaluator = InProcessEvaluator(terrain, spec)
    rng = np.random.default_rng(2026)
    refs = [evaluator.put((0.3 * rng.standard_normal(spec.num_params)).astype(np.float32)) for _ in range(3)]
    requests = [
        EvalRequest(refs[i], EnvParams.create("terrain", level), episodes=2, seed=11 + j, max_steps=600)
        for i in range(3)
        for j, level in enumerate(LEVELS)
    ]
    results = evaluator.evaluate(requests)
    assert [[float(x).hex() for x in r.returns] for r in results] == RETURNS
    assert [[int(n) for n in r.lengths] for r in results] == LENGTHS
