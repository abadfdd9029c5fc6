"""Course profiles a reader can read, and `poet render` / `poet profile` on the command line.

The figures are checked through matplotlib's objects (title, axis labels, legend entries,
limits), never through pixels.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from matplotlib.figure import Figure
from PIL import Image

import envs
import poet
from envs import EnvParams
from envs.profile import CourseProfile
from poet.analysis import load_run
from poet.analysis.images import course_figure, profile_figure
from poet.analysis.render import find_env, find_pair, load_agents
from poet.evaluation.inprocess import InProcessEvaluator
from poet.evaluation.protocol import EvalRequest
from tests.conftest import ROOT, poet_in_process, tiny_config

POET_COURSE = {"roughness": 2.4, "pit_gap": [0.8, 2.4], "stump_height": [0.4, 1.2]}
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _legend(fig: Figure) -> list[str]:
    legend = fig.axes[0].get_legend()
    assert legend is not None
    return [t.get_text() for t in legend.get_texts()]


def _check_axes(fig: Figure, profile: CourseProfile) -> None:
    """Labelled axes in metres whose limits hold the whole course."""
    ax = fig.axes[0]
    assert ax.get_xlabel() == "distance along the course (m)"
    assert ax.get_ylabel().startswith("height (m)")
    assert ax.get_xlim() == (profile.x[0], profile.x[-1])
    lo, hi = profile.extent
    assert ax.get_ylim()[0] < lo and ax.get_ylim()[1] > hi


@pytest.mark.parametrize("name", ["terrain", "bipedal"])
def test_obstacle_course_figure_has_title_axes_and_legend(name):
    family = envs.make_family(name)
    params = EnvParams.create(name, POET_COURSE)
    profile = family.course_profile(params, seed=0)
    assert profile.pits and profile.stumps
    fig = profile_figure(profile, params.id)
    title = fig.axes[0].get_title()
    assert title == (f"{name} env {params.id} · roughness 2.4 · pit gap 0.8-2.4 · stump height 0.4-1.2 · course seed 0")
    _check_axes(fig, profile)
    assert _legend(fig) == [
        "ground",
        f"pit ({len(profile.pits)})",
        f"stump ({len(profile.stumps)})",
        "start pad",
        "finish",
    ]
    # the y label says how much the heights are stretched against the distances
    assert "vertical ×" in fig.axes[0].get_ylabel()


@pytest.mark.parametrize("name", ["terrain", "bipedal"])
def test_flat_course_figure_says_what_is_missing(name):
    family = envs.make_family(name)
    fig = course_figure(family, family.initial(), seed=5, env_id=family.initial().id)
    assert fig.axes[0].get_title().endswith("roughness 0 · no pits · no stumps · course seed 5")
    assert _legend(fig) == ["ground", "start pad", "finish"]
    assert fig.axes[0].get_xlabel() and fig.axes[0].get_ylabel()


def test_cppn_figure_names_the_genome_and_no_seed():
    family = envs.make_family("bipedal_cppn")
    rng = np.random.default_rng(7)
    params = family.initial(rng)
    for _ in range(10):
        params = family.mutate(params, rng)
    profile = family.course_profile(params, seed=3)
    assert profile.seed is None and not profile.pits and not profile.stumps
    stats = family.flat(params)
    fig = profile_figure(profile, params.id)
    title = fig.axes[0].get_title()
    assert title.startswith(f"bipedal_cppn env {params.id} · {stats['hidden_nodes']:.0f} hidden nodes · ")
    assert f"amplitude {stats['amplitude']:.2f} m" in title and "seed" not in title
    _check_axes(fig, profile)
    assert _legend(fig) == ["ground", "start pad", "finish"]


def test_course_figure_needs_a_family_with_profiles():
    with pytest.raises(poet.ConfigError, match="'cartpole' has no course profile"):
        course_figure(envs.make_family("cartpole"), envs.make_family("cartpole").initial(), name="cartpole")


# ---------------------------------------------------------------- command line


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A tiny POET run with checkpoints."""
    out = tmp_path_factory.mktemp("figures") / "run"
    poet.run(tiny_config(iterations=8, checkpoint={"every": 4}), out=out, progress=False)
    return out


def _refused(proc: subprocess.CompletedProcess, *needles: str) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("poet: error: "), proc.stderr
    assert all(n in lines[0] for n in needles), lines[0]
    assert proc.stdout == ""
    return lines[0]


def test_render_refuses_other_formats_before_any_work(run_dir, tmp_path):
    # a real run, and not even a run directory: the extension is looked at first
    cases = [(run_dir, tmp_path / "x.png"), *((tmp_path / "no-run", tmp_path / name) for name in ("x.mp4", "x"))]
    procs = [poet_in_process(["render", run, "--pair", "p0", "--out", out]) for run, out in cases]
    for (_, out), proc in zip(cases, procs):
        line = _refused(proc, repr(str(out)), "supported extensions: .gif")
        assert "not a run directory" not in line
    assert list(tmp_path.iterdir()) == []


def test_render_prints_the_episode_return_the_evaluator_computes(run_dir, tmp_path):
    parts, snapshot = load_agents(run_dir)
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    envs_ = load_run(run_dir).envs
    last_env = envs_["env_id"].iloc[-1]
    # the pair's own env; an env by its id; an env by the pair it was made for
    cases = (("p0", None, 0), ("p0", last_env, 4), ("p1", "p0", 0))
    outs = [tmp_path / f"{i}.gif" for i in range(len(cases))]
    procs = [
        poet_in_process(
            ["render", run_dir, "--pair", pair_id, *(["--env", env] if env else []), "--seed", seed, "--out", out]
        )
        for (pair_id, env, seed), out in zip(cases, outs)
    ]
    for (pair_id, env, seed), out, proc in zip(cases, outs, procs):
        pair = find_pair(snapshot, pair_id)
        params = pair.env if env is None else find_env(run_dir, env)
        ref = evaluator.put(pair.theta)
        result = evaluator.evaluate([EvalRequest(ref, params, 1, seed, parts.cfg.evaluation.max_steps)])[0]
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        episode, path = proc.stdout.splitlines()
        whose = "its own env" if env is None else "env"
        assert episode == (
            f"episode: {pair_id} on {whose} {params.id} (course seed {params.course_seed}): "
            f"return {result.returns[0]:.2f} over {result.lengths[0]} steps"
        )
        assert Path(path) == out
        with Image.open(out) as gif:
            assert gif.format == "GIF" and gif.n_frames > 1
    assert find_env(run_dir, "p0") == EnvParams.from_json(envs_.set_index("pair_id").loc["p0", "params_json"])


def test_profile_writes_a_png_by_env_or_by_pair(run_dir, tmp_path):
    env_id = load_run(run_dir).envs.set_index("pair_id").loc["p0", "env_id"]
    commands = {
        "env.png": ["--env", env_id, "--out", tmp_path / "env.png"],
        "pair.png": ["--env", "p0", "--out", tmp_path / "pair.png"],
        "c.svg": ["--env", "p0", "--out", tmp_path / "c.svg"],
        "gif": ["--env", "p0", "--out", tmp_path / "c.gif"],
        "bad_pair": ["--env", "p99", "--out", tmp_path / "c.png"],
    }
    procs = {name: poet_in_process(["profile", run_dir, *args]) for name, args in commands.items()}
    for name in ("env.png", "pair.png", "c.svg"):
        assert procs[name].returncode == 0, procs[name].stderr
        assert procs[name].stdout.strip() == str(tmp_path / name)
    for name in ("env.png", "pair.png"):
        assert (tmp_path / name).read_bytes()[:8] == PNG_MAGIC
    with Image.open(tmp_path / "env.png") as a, Image.open(tmp_path / "pair.png") as b:
        assert np.array_equal(np.asarray(a), np.asarray(b))  # --env p0 is p0's env
    assert (tmp_path / "c.svg").read_text().lstrip().startswith("<?xml")
    _refused(procs["gif"], "'" + str(tmp_path / "c.gif") + "'", ".png, .svg, .pdf")
    _refused(procs["bad_pair"], "'p99'", "neither an env id nor a pair id", env_id)
    assert not (tmp_path / "c.gif").exists() and not (tmp_path / "c.png").exists()


# ---------------------------------------------------------------- pictures of the README and docs


def shown_pictures() -> set[str]:
    """Every picture the README and the documentation pages show, as a path from the repository
    root (a page's path is relative to its folder; the site's `results/` files are the study's)."""
    import re

    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    from docs_hook import EXTERNAL_FILES

    picture = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
    shown = set(picture.findall((ROOT / "README.md").read_text()))
    docs = ROOT / "docs"
    for page in docs.rglob("*.md"):
        for link in picture.findall(page.read_text()):
            site_path = (page.parent / link).resolve().relative_to(docs).as_posix()
            shown.add(EXTERNAL_FILES.get(site_path, f"docs/{site_path}"))
    return shown


def test_make_pictures_draws_every_picture_the_readme_and_the_docs_show():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shown = shown_pictures()
    drawn = {path for paths in module.PICTURES.values() for path in paths}
    assert shown and shown == drawn
    assert set(module.PICTURES) == set(module.GROUPS) >= {"profiles", "frames", "tree"}
    assert all((ROOT / path).is_file() for path in drawn)


def assert_same_picture(committed: Path, drawn: Path) -> None:
    """The picture the docs show is the one drawn now (up to anti-aliasing)."""
    from matplotlib.image import imread

    a, b = imread(committed), imread(drawn)
    assert a.shape == b.shape, committed.name
    assert np.abs(a - b).mean() < 0.01, f"{committed.name} is stale: python docs/make_pictures.py redraws it"


@pytest.mark.parametrize("group", ["profiles", "frames"])
def test_the_course_pictures_the_docs_show_are_what_make_pictures_draws_now(tmp_path, monkeypatch, group):
    """docs/*_mutated.png and docs/*_frame.png are redrawn from today's families: a change to a
    family's courses that leaves them stale fails here (the quickstart's env tree is checked
    with its run, in tests/test_run.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_pictures", ROOT / "docs" / "make_pictures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "DOCS", tmp_path)
    for path in module.GROUPS[group](None):
        assert_same_picture(ROOT / "docs" / path.name, path)
