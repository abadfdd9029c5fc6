"""Run analysis: `poet report` figures and page, `poet render` GIFs, and the analysis notebook.

One small Enhanced POET run (module fixture) serves every test; the CLI commands run through
main() in this process (`poet_in_process`), since a subprocess each pays a few seconds of imports.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import nbformat
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from PIL import Image

import poet
from envs import EnvParams
from poet.analysis import load_run, report
from poet.analysis.images import course_figure, figure_rgb
from poet.analysis.render import episode_frames, find_env, load_agents, render_gif, subsample
from poet.analysis.report import FIGURES, write_report
from poet.runtime import checkpoint
from tests.conftest import ROOT, poet_in_process, tiny_config

NOTEBOOK = ROOT / "notebooks" / "analyze_run.ipynb"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 12-iteration Enhanced POET run with checkpoints every 4 iterations."""
    out = tmp_path_factory.mktemp("report") / "run"
    poet.run(tiny_config(curriculum="enhanced_poet", iterations=12, checkpoint={"every": 4}), out=out, progress=False)
    return out


@pytest.fixture(scope="module")
def pairs(run_dir) -> tuple[str, str]:
    """Two active pair ids of the run's newest checkpoint."""
    active = checkpoint.latest(run_dir).state.population.active
    assert len(active) >= 2
    return active[0].pair_id, active[-1].pair_id


@pytest.fixture(scope="module")
def cli_out(tmp_path_factory) -> Path:
    """Where the CLI commands write."""
    return tmp_path_factory.mktemp("cli")


@pytest.fixture(scope="module")
def cli(run_dir, pairs, cli_out) -> dict[str, subprocess.CompletedProcess]:
    """Every CLI command of this module, in this process; results by name."""
    out = cli_out
    own, other = pairs
    other_env = load_run(run_dir).envs.set_index("pair_id").loc[other, "env_id"]
    commands = {
        "report": ["report", run_dir, "--out", out / "report"],
        "gif_own": ["render", run_dir, "--pair", own, "--out", out / "own.gif"],
        "gif_other": ["render", run_dir, "--pair", own, "--env", other_env, "--seed", 1, "--out", out / "other.gif"],
        "bad_pair": ["render", run_dir, "--pair", "p999", "--out", out / "x.gif"],
        "bad_env": ["render", run_dir, "--pair", own, "--env", "0123456789abcdef", "--out", out / "x.gif"],
        "bad_dir_render": ["render", out, "--pair", own, "--out", out / "x.gif"],
        "bad_dir_report": ["report", out / "nowhere"],
        "profile": ["profile", run_dir, "--env", other_env, "--seed", 3, "--out", out / "course.png"],
        "bad_profile_env": ["profile", run_dir, "--env", "nope", "--out", out / "x.png"],
    }
    return {name: poet_in_process(args) for name, args in commands.items()}


def _ok(proc: subprocess.CompletedProcess) -> Path:
    """Exit 0; the last line printed is a path that exists (`poet render` prints the episode's return before it)."""
    assert proc.returncode == 0, proc.stderr
    path = Path(proc.stdout.strip().splitlines()[-1])
    assert path.is_file(), proc.stdout
    return path


def _one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2 and exactly one `poet: error:` line naming every needle."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("poet: error: "), proc.stderr
    assert all(n in lines[0] for n in needles), (needles, lines[0])
    assert proc.stdout == ""


def _check_pngs(folder: Path) -> None:
    """Every figure of FIGURES is a real PNG in `folder`, shown by its index.html."""
    page = (folder / "index.html").read_text()
    for name in FIGURES:
        data = (folder / f"{name}.png").read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
        assert f'src="{name}.png"' in page


# ---------------------------------------------------------------- report


def test_report_cli_writes_every_figure_and_the_page(cli, cli_out):
    index = _ok(cli["report"])
    assert index == cli_out / "report" / "index.html"
    _check_pngs(index.parent)
    page = index.read_text()
    assert "enhanced" in page and "terrain" in page and "final ANNECS" in page


def test_report_draws_every_envs_course_from_the_records(cli, cli_out, run_dir):
    index = _ok(cli["report"])
    envs_ = load_run(run_dir).envs
    family = load_agents(run_dir)[0].family
    page = index.read_text()
    assert sorted(p.stem for p in (index.parent / "courses").glob("*.png")) == sorted(envs_["env_id"])
    for env_id, text in zip(envs_["env_id"], envs_["params_json"]):
        assert f'src="courses/{env_id}.png"' in page
        params = EnvParams.from_json(text)
        assert params.course_seed is not None  # evaluation.course: fixed, the default
        with Image.open(index.parent / "courses" / f"{env_id}.png") as png:
            expected = figure_rgb(course_figure(family, params, 0, env_id))  # the course it trained on
            assert np.array_equal(np.asarray(png.convert("RGB")), expected)
    assert "the initial env, created at iteration 0" in page


def test_course_images_limit_and_families_without_profiles(run_dir, tmp_path, monkeypatch):
    from poet.analysis import report

    run = load_run(run_dir)
    newest = run.envs.sort_values("created_iteration", kind="stable")["env_id"].tolist()[-2:]
    assert list(report.course_images(run, limit=2)) == newest
    run.config["env"] = {"family": "not_registered_here"}
    assert report.course_images(run) == {}
    run.config["env"] = {"family": "cartpole"}  # a generic gymnasium family: no course to draw
    assert report.course_images(run) == {}
    monkeypatch.setattr(report, "course_images", lambda run: {})
    index = write_report(run_dir, tmp_path / "r")
    assert not (index.parent / "courses").exists() and "courses/" not in index.read_text()


def test_every_figure_function_returns_a_figure(run_dir):
    run = load_run(run_dir)
    assert set(FIGURES) == {
        "scores",
        "env_params",
        "env_tree",
        "phylogeny",
        "env_param_map",
        "transfer_matrix",
        "annecs",
        "difficulty",
        "population",
        "heldout",
    }
    for name, make in FIGURES.items():
        assert isinstance(make(run), Figure), name


def test_difficulty_figure_counts_envs_created_and_solved_per_class(run_dir, tmp_path):
    from poet.analysis.report import difficulty_figure

    run = load_run(run_dir)
    labels = [t.get_text() for t in difficulty_figure(run).axes[0].get_legend().get_texts()]
    envs_t = run.envs
    for level, name in enumerate(("easy", "challenging", "very challenging", "extremely challenging")):
        rows = envs_t[envs_t["difficulty"] == level]
        assert f"{name}: {len(rows)} created, {rows['solved_iteration'].notna().sum()} solved" in labels
    # a family without classes (the column all <NA>) says so instead of drawing empty lines
    run.envs = envs_t.assign(difficulty=pd.array([pd.NA] * len(envs_t), dtype="Int64"))
    fig = difficulty_figure(run)
    assert fig.axes[0].get_legend() is None
    assert any("defines no difficulty classes" in t.get_text() for t in fig.axes[0].texts)


def test_report_default_folder_and_empty_runs(run_dir, tmp_path):
    assert write_report(run_dir) == run_dir / "report" / "index.html"
    short = tmp_path / "short"
    poet.run(tiny_config(iterations=2), out=short, progress=False)
    run = load_run(short)
    assert not len(run.transfers) and not len(run.children())
    _check_pngs(write_report(short).parent)
    (tmp_path / "blank" / "records").mkdir(parents=True)  # a run that has not written a row yet
    _check_pngs(write_report(tmp_path / "blank").parent)


# ---------------------------------------------------------------- render


def _frames(path: Path) -> int:
    """Frames of a GIF (also checks it opens as one)."""
    with Image.open(path) as gif:
        assert gif.format == "GIF"
        return gif.n_frames


def test_render_cli_writes_gifs(cli):
    assert _frames(_ok(cli["gif_own"])) > 1
    assert _frames(_ok(cli["gif_other"])) > 1


def test_profile_cli_draws_the_env_course(cli, cli_out, run_dir, pairs):
    """`poet profile` writes the family's profile of the env, rebuilt from the records."""
    path = _ok(cli["profile"])
    assert path.read_bytes()[:8] == PNG_MAGIC
    env_id = load_run(run_dir).envs.set_index("pair_id").loc[pairs[1], "env_id"]
    params = find_env(run_dir, env_id)
    family = load_agents(run_dir)[0].family
    with Image.open(path) as png:
        # a pinned env is drawn on its own course; --seed only matters for unpinned ones
        expected = figure_rgb(course_figure(family, params, 0, env_id))
        assert np.array_equal(np.asarray(png.convert("RGB")), expected)
    _one_error_line(cli["bad_profile_env"], "'nope'", env_id)


def test_cli_errors_are_one_line(cli, pairs, run_dir):
    _one_error_line(cli["bad_pair"], "p999", *pairs)
    _one_error_line(cli["bad_env"], "0123456789abcdef", load_run(run_dir).envs["env_id"].iloc[0])
    _one_error_line(cli["bad_dir_render"], "not a run directory")
    _one_error_line(cli["bad_dir_report"], "not a run directory")


def test_render_gif_api_prints_nothing(run_dir, pairs, tmp_path, capsys):
    archived = checkpoint.latest(run_dir).state.population.archive
    pair_id = archived[0].pair_id if archived else pairs[0]
    out = render_gif(run_dir, pair_id, tmp_path / "a.gif", fps=10)
    assert out == tmp_path / "a.gif" and _frames(out) > 1
    assert capsys.readouterr() == ("", "")
    with pytest.raises(poet.ConfigError, match="unknown env"):
        render_gif(run_dir, pairs[0], tmp_path / "b.gif", env_id="nope")


class _NoFrames:
    """A family whose envs render no rgb frames."""

    def make_env(self, params: EnvParams, render_mode: str | None = None) -> gym.Env:
        env = gym.make("CartPole-v1")
        env.unwrapped.metadata = {"render_modes": []}
        return env


def test_family_without_rgb_frames_is_a_config_error(run_dir):
    from poet.analysis.render import load_agents

    parts, snapshot = load_agents(run_dir)
    pair = snapshot.state.population.active[0]
    with pytest.raises(poet.ConfigError, match="'blind' cannot render"):
        episode_frames(_NoFrames(), parts.spec, pair.theta, pair.env, 0, 10, "blind")


def test_subsample_keeps_the_last_frame():
    frames = [np.full((2, 2, 3), i % 256, np.uint8) for i in range(1000)]
    kept, step = subsample(frames, 300)
    assert len(kept) <= 300 and step == 4 and kept[-1] is frames[-1]
    assert subsample(frames[:5], 300) == (frames[:5], 1)


# ---------------------------------------------------------------- notebook


def test_committed_notebook_has_no_outputs():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(nb)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code and all(c.outputs == [] and c.execution_count is None for c in code)


def test_the_notebook_imports_only_public_names_of_poet():
    import ast

    import poet.analysis

    nb = nbformat.read(NOTEBOOK, as_version=4)
    imported = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "poet":
                imported += [(node.module, alias.name) for alias in node.names]
            elif isinstance(node, ast.Import):
                assert not [a.name for a in node.names if a.name.split(".")[0] == "poet"], ast.unparse(node)
    assert imported and {module for module, _ in imported} == {"poet.analysis"}, imported
    assert {name for _, name in imported} <= set(poet.analysis.__all__)
    for name in poet.analysis.__all__:
        assert getattr(poet.analysis, name) is not None


def _this_python_kernel():
    """A kernel manager whose kernel runs on this interpreter, whatever kernelspecs are installed."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager
    from jupyter_client.manager import KernelManager

    class ThisPython(KernelSpecManager):
        def get_kernel_spec(self, kernel_name: str) -> KernelSpec:
            argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
            return KernelSpec(argv=argv, display_name="poet tests", language="python", name=kernel_name)

    return KernelManager(kernel_name="python3", kernel_spec_manager=ThisPython())


def test_notebook_runs_against_the_run(run_dir, monkeypatch):
    from nbclient import NotebookClient

    monkeypatch.setenv("POET_RUN_DIR", str(run_dir))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        km=_this_python_kernel(),
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == len(FIGURES) + 2  # + cross-eval, robustness
    text = "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in outputs)
    assert str(run_dir) in text and "env_id" in text and "no agents" not in text and "no robustness" not in text


def test_notebook_runs_against_an_accel_run(tmp_path, monkeypatch):
    """The notebook reads any curriculum's run directory (here ACCEL: one agent, a level buffer)."""
    from nbclient import NotebookClient

    out = tmp_path / "accel"
    poet.run(
        tiny_config(
            curriculum="accel",
            curriculum_options={"buffer_size": 4, "num_levels": 2},
            iterations=8,
            evaluation={**tiny_config()["evaluation"], "test_every": 4},
        ),
        out=out,
        progress=False,
    )
    monkeypatch.setenv("POET_RUN_DIR", str(out))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = NotebookClient(
        nb,
        km=_this_python_kernel(),
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(NOTEBOOK.parent)}},
    )
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == len(FIGURES) + 2


def test_scores_figure_is_a_heat_map_of_pairs_by_iterations_with_at_most_20_labels(run_dir):
    from poet.analysis.report import scores_figure

    run = load_run(run_dir)
    fig = scores_figure(run)
    heat = fig.axes[0]
    image = heat.get_images()[0].get_array()
    pairs, iterations = run.iterations["pair_id"].nunique(), run.iterations["iteration"].nunique()
    assert image.shape == (pairs, iterations)
    assert len(heat.get_yticklabels()) <= 20 and "moving average" in heat.get_title()
    assert {line.get_label() for line in fig.axes[1].get_lines()} >= {"best pair", "median pair"}


# ---------------------------------------------------------------- level-buffer runs (ACCEL), summaries


@pytest.fixture(scope="module")
def accel_runs(tmp_path_factory) -> dict[str, Path]:
    """Two tiny ACCEL runs: dcd's buffer (1000 levels, replays from 500), whose 3 iterations
    only explore; and a 12-level buffer that replays and edits over 30 iterations."""
    base = tmp_path_factory.mktemp("accel")
    poet.run(tiny_config(curriculum="accel", iterations=3), out=base / "explore", progress=False)
    poet.run(
        tiny_config(curriculum="accel", curriculum_options={"buffer_size": 12, "num_levels": 4}, iterations=30),
        out=base / "replay",
        progress=False,
    )
    return {"explore": base / "explore", "replay": base / "replay"}


def _texts(fig: Figure) -> str:
    """Every text of a figure's axes (titles, notes, annotations) on one line each."""
    return "\n".join([ax.get_title() for ax in fig.axes] + [t.get_text() for ax in fig.axes for t in ax.texts])


def test_report_of_a_run_that_only_explored_says_no_training_yet(accel_runs):
    from poet.analysis.report import env_tree_figure, scores_figure, summary

    index = _ok(poet_in_process(["report", accel_runs["explore"]]))
    _check_pngs(index.parent)
    run = load_run(accel_runs["explore"])
    assert len(run.iterations) == 0
    assert "no training yet: 48 levels explored, buffer fills to 500 (of 1000) before the first replay" in _texts(
        scores_figure(run)
    )
    assert "no level replayed yet: 49 levels, none trained on" in _texts(env_tree_figure(run))
    table = summary(run)
    assert table["iterations"] == 3 and table["replays (one trainer step each)"] == 0
    assert table["levels in the buffer / capacity"] == "48 / 1000 (replays start at 500)"
    assert table["agent's score after its last replay"] == "no replay yet"
    assert not [k for k in table if "ANNECS" in k or "transfers" in k]
    with Image.open(index.parent / "env_tree.png") as png:
        assert png.size[0] <= 1000 and png.size[1] <= 1400


def test_report_of_a_replaying_accel_run_draws_its_scores_and_a_bounded_tree(accel_runs, monkeypatch):
    import poet.analysis.report as report

    index = _ok(poet_in_process(["report", accel_runs["replay"]]))
    run = load_run(accel_runs["replay"])
    replayed = set(run.events.loc[run.events["kind"] == "replayed", "env_id"])
    assert len(run.iterations) >= len(replayed) >= 3
    # the scores figure: one point per replay
    top = report.scores_figure(run).axes[0]
    assert len(top.collections[0].get_offsets()) == len(run.iterations) > 0
    # the tree: the replayed levels and their ancestors only, labelled by their parameters
    parent = dict(zip(run.envs["env_id"], run.envs["parent_env_id"]))
    expected = set()
    for env_id in replayed:
        while isinstance(env_id, str) and env_id in parent:
            expected.add(env_id)
            env_id = parent[env_id]
    assert len(expected) < len(run.envs)
    fig = report.env_tree_figure(run)
    ax = fig.axes[0]
    assert len(ax.collections[0].get_offsets()) == len(expected)
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    xs, ys = ax.collections[0].get_offsets().T
    room = report._label_room(np.asarray(xs), np.asarray(ys))  # one agent: no pair id where a label has no room
    assert len(labels) == room.sum() and all(label.startswith("rough ") for label in labels), labels
    assert "never replayed" in ax.get_title()
    with Image.open(index.parent / "env_tree.png") as png:
        assert png.size[0] <= 1000 and png.size[1] <= 1400
    # past MAX_TREE_NODES the most replayed are drawn and the figure says what was left out
    monkeypatch.setattr(report, "MAX_TREE_NODES", 3)
    ax = report.env_tree_figure(run).axes[0]
    assert len(ax.collections[0].get_offsets()) <= 3 and "beyond 3 nodes left out" in ax.get_title()


def test_summary_numbers_are_named_by_what_they_count(run_dir, tmp_path):
    from poet.analysis.report import summary

    enhanced = summary(load_run(run_dir))
    key = "final ANNECS as the reference code counts it (admitted envs the best archived agent passed the MC on)"
    assert key in enhanced and not [k for k in enhanced if "counter" in k]
    poet.run(tiny_config(iterations=2), out=tmp_path / "poet", progress=False)
    plain = summary(load_run(tmp_path / "poet"))
    assert "final ANNECS (paper's definition: envs made by reproduction and later solved)" in plain
    assert not [k for k in plain if "reference" in k]
    page = write_report(tmp_path / "poet").read_text()
    table = page[page.index("<table>") : page.index("</table>")]
    assert "reference code" not in table and "counter" not in table and "ANNECS (paper" in table
    poet.run(tiny_config(curriculum="dr", iterations=3), out=tmp_path / "dr", progress=False)
    dr = summary(load_run(tmp_path / "dr"))
    assert dr["trainer steps"] == 3 and dr["envs trained on"] == 3 and not [k for k in dr if "ANNECS" in k]


def test_poet_env_tree_labels_each_env_by_its_parameters_and_pair(run_dir, monkeypatch):
    import poet.analysis.report as report

    run = load_run(run_dir)
    ax = report.env_tree_figure(run).axes[0]
    labels = [t.get_text() for t in ax.texts if t.get_text()]
    assert len(labels) == run.envs["env_id"].nunique()
    assert all(label.startswith("rough ") and label.endswith(")") for label in labels), labels
    assert ax.get_title() == "Env tree"
    monkeypatch.setattr(report, "MAX_TREE_NODES", 2)
    ax = report.env_tree_figure(run).axes[0]
    assert len(ax.collections[0].get_offsets()) <= 2 and "left out" in ax.get_title()


def test_a_long_tree_label_breaks_into_two_lines_at_a_comma():
    # labels of envs one reproduction apart ran into each other on one line
    from poet.analysis.report import _two_lines

    assert _two_lines("rough 0, pits 0.4-1.6, stumps 0.2-0.8 (p5)") == "rough 0, pits 0.4-1.6\nstumps 0.2-0.8 (p5)"
    assert _two_lines("rough 0 (p0)") == "rough 0 (p0)"
    assert _two_lines("a_very_long_label_without_any_comma_in_it") == "a_very_long_label_without_any_comma_in_it"


# ---------------------------------------------------------------- a curriculum of the user's


class SampledEnvCurriculum:
    """A curriculum defined here, registered nowhere and declaring no report traits: one agent
    trained on a fresh sample of the family's range every third iteration."""

    name = "sampled_env"

    def start(self, ctx) -> None:
        from poet.curricula.common import start_pair

        start_pair(ctx)

    def run_iteration(self, ctx, iteration: int, phase) -> None:
        import numpy as np

        from poet.curricula.common import record_level, train_pairs

        pair = ctx.state.population.active[0]
        if iteration and iteration % 3 == 0:
            parent = pair.env.id
            pair.env = ctx.family.sample(np.random.default_rng(iteration))
            record_level(ctx, pair.env, pair.pair_id, parent, iteration)
        with phase("train"):
            train_pairs(ctx, iteration)


def test_a_users_curriculum_gets_a_complete_report_and_compare_page(run_dir, tmp_path):
    """Analysis names no curriculum: a curriculum the report has never heard of is drawn from
    what its run recorded, and a registered one's traits are in run.json."""
    out = tmp_path / "mine"
    poet.run(tiny_config(curriculum="tests.test_report:SampledEnvCurriculum", iterations=9), out=out, progress=False)
    run = load_run(out)
    assert "report_traits" in run.info and run.info["report_traits"] == {}
    assert report.traits(run) == {"kind": "population", "annecs_reference": False}  # envs with parents
    assert load_run(run_dir).info["report_traits"] == {"kind": "population", "annecs_reference": True}
    for command in (
        ["report", str(out), "--out", str(tmp_path / "r")],
        ["compare", str(out), str(run_dir), "--out", str(tmp_path / "c")],
    ):
        proc = subprocess.run([sys.executable, "-m", "poet.cli", *command], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
    page = (tmp_path / "r" / "index.html").read_text()
    assert all(f'src="{name}.png"' in page for name in FIGURES) and "tests.test_report:SampledEnvCurriculum" in page
    assert (tmp_path / "c" / "index.html").is_file()


def test_analysis_names_no_curriculum():
    """No curriculum's name as a string in poet/analysis/, and none of the distinctive ones
    (every name but the common words "poet", "path" and "direct") anywhere in its text."""
    import ast

    from poet.curricula import CURRICULA

    distinctive = [name for name in CURRICULA if name not in ("poet", "path", "direct")]
    for path in sorted((ROOT / "poet" / "analysis").glob("*.py")):
        text = path.read_text()
        strings = {
            n.value for n in ast.walk(ast.parse(text)) if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        assert not strings & set(CURRICULA), (path.name, strings & set(CURRICULA))
        assert not [n for n in distinctive if re.search(rf"\b{n}\b", text.lower())], path.name


def test_tree_labels_never_run_into_the_next_node_on_their_row():
    xs = np.array([0.0, 5.0, 40.0, 0.0, 100.0])
    ys = np.array([0.0, 0.0, 0.0, 1.0, 1.0])
    # span 100: a label takes 22 iterations; 0 -> 5 is too close, 5 -> 40 is not, a row's last always fits
    assert report._label_room(xs, ys).tolist() == [False, True, True, True, True]


def test_a_long_tree_title_is_wrapped_not_cut_off(run_dir):
    run = load_run(run_dir)
    fig = report.env_tree_figure(run)
    assert all(len(line) <= 110 for line in fig.axes[0].get_title().splitlines())


@pytest.mark.parametrize("name", ["terrain", "cartpole"])
def test_a_rendered_episode_returns_the_score_of_the_same_episode(name):
    """`poet render` plays an episode with the forward and the ending the evaluators score with:
    its return and length are the scored ones, bit for bit (terrain is scored by its row
    kernel, cartpole by gymnasium envs in slots)."""
    from envs.registry import EXAMPLE_OPTIONS, make_family
    from poet.analysis.render import play_episode
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.policies import init_flat, spec_for_spaces
    from poet.seeding import episode_seeds
    from tests.conftest import mutation_chain

    family = make_family(name, {"course_length": 12.0} if name == "terrain" else EXAMPLE_OPTIONS.get(name))
    probe = family.make_env(family.initial())
    spec = spec_for_spaces(probe.observation_space, probe.action_space, (16, 16), "tanh")
    probe.close()
    ev = InProcessEvaluator(family, spec)
    envs_ = [family.initial(), *mutation_chain(family, 2, 3)]
    lengths = set()
    for i in range(6):
        theta = init_flat(spec, np.random.default_rng(i)) * (1.0 + i)
        scored = ev.evaluate([EvalRequest(ev.put(theta), envs_[i % 3], 1, 100 + i, 300)])[0]
        played = play_episode(family, spec, theta, envs_[i % 3], episode_seeds(100 + i, 1)[0], 300, name)
        assert (played.ret, played.length) == (scored.returns[0], scored.lengths[0])
        assert len(played.frames) == played.length + 1
        lengths.add(played.length)
    assert len(lengths) > 1  # episodes of several lengths: the ending is compared, not only the cap
