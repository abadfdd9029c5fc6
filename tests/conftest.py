"""Shared fixtures: a tiny, fast POET config on a short terrain course."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Never open windows from gymnasium/pygame during tests.
os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("SDL_AUDIODRIVER", "dummy")


def pytest_configure(config: pytest.Config) -> None:
    """Compile the numba kernels into numba's on-disk cache once, before any test or xdist
    worker runs: on a fresh clone the cache is empty, and every process that starts cold (each
    test worker, each Ray worker, each `poet` subprocess) would compile the same kernels itself,
    about half a minute of CPU each."""
    if hasattr(config, "workerinput"):  # an xdist worker: the controller did it before starting it
        return
    # the planner's kernels in a second process meanwhile: on a fresh clone they are a third
    # of the compile, and the two sets share only terrain's step
    planner = subprocess.Popen(
        [sys.executable, "-c", "from tests.conftest import compile_planner; compile_planner()"], cwd=ROOT
    )
    compile_kernels()
    if planner.wait() != 0:
        raise RuntimeError("compiling the planner's kernels failed (see above)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The files that hold tests marked slow (whole runs) first, in their own order: under
    `make test`'s `--dist loadfile` each file runs on one worker, and with the long files
    started first the short ones fill the end instead of one long file running alone."""
    slow_files = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.path not in slow_files)


def compile_kernels() -> None:
    """One small rollout on each path whose kernels numba compiles: terrain's row kernel and
    course layout, the policy forwards of box and discrete actions."""
    import numpy as np

    from envs.registry import make_family
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.policies import init_flat, spec_for_spaces

    for name, options in (("terrain", {"course_length": 12.0}), ("cartpole", None)):
        family = make_family(name, options)
        env = family.make_env(family.initial())
        spec = spec_for_spaces(env.observation_space, env.action_space, (4, 4), "tanh")
        env.close()
        evaluator = InProcessEvaluator(family, spec)
        theta = evaluator.put(init_flat(spec, np.random.default_rng(0)))
        evaluator.evaluate([EvalRequest(theta, family.initial(), 1, 0, 20)])


def compile_planner() -> None:
    """One search of the feasibility planner on a short course."""
    from envs.terrain import course_from_values
    from envs.terrain_planner import plan

    plan(course_from_values(1.0, (), (), 0, 12.0), 20)


def assert_torch_stays_unloaded(code: str) -> None:
    """Run `code` in a fresh interpreter at the repository root; it must end with torch not imported."""
    check = "\nimport sys\nassert 'torch' not in sys.modules, 'torch was loaded'\n"
    proc = subprocess.run([sys.executable, "-c", code + check], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


def poet_in_process(args: list, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    """`poet ARGS` through the CLI's `main()` in this process, from `cwd`: its exit code, stdout
    and stderr, with Python's default warning filters (pytest's would show warnings a user
    never sees). The CLI's whole behaviour without an interpreter's start-up per command; runs
    that are killed or start their own Ray stay subprocesses, and tests/test_readme_commands.py
    runs the installed program."""
    from poet.cli import main

    out, err, before = io.StringIO(), io.StringIO(), Path.cwd()
    argv = [str(a) for a in args]
    with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        os.chdir(cwd)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
        finally:
            os.chdir(before)
    return subprocess.CompletedProcess(["poet", *argv], code, out.getvalue(), err.getvalue())


def mutation_chain(family, n: int, seed: int) -> list:
    """n chained mutations of the family's initial params (initial excluded), all from one seeded Generator."""
    import numpy as np

    rng = np.random.default_rng(seed)
    params, out = family.initial(), []
    for _ in range(n):
        params = family.mutate(params, rng)
        out.append(params)
    return out


def tiny_config(**sections) -> dict:
    """A POET config that runs a dozen iterations in a few seconds."""
    cfg = {
        "curriculum": "poet",
        "seed": 3,
        "iterations": 12,
        "progress": False,
        "env": {"family": "terrain", "options": {"course_length": 20.0, "max_episode_steps": 150}},
        "policy": {"hidden": [16, 16]},
        "evaluation": {"max_steps": 150, "eval_episodes": 2, "backend": "inprocess"},
        "trainer": {"name": "es", "es": {"population": 16, "noise_table_size": 200_000, "lr": 0.03}},
        "reproduction": {
            "every": 4,
            "threshold": 100.0,
            "max_children": 4,
            "max_admitted": 2,
            "capacity": 4,
            "novelty_k": 3,
        },
        "transfer": {"every": 3},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


@pytest.fixture
def tiny():
    """Factory for tiny configs: tiny(curriculum="enhanced_poet", evaluation={...})."""
    return tiny_config


@pytest.fixture(scope="session")
def ray_local():
    """One local Ray instance (2 CPUs) shared by every test that needs it."""
    import ray

    if not ray.is_initialized():
        # a new instance, never one RAY_ADDRESS or a running cluster points to
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    yield ray
    ray.shutdown()
