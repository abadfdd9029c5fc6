"""The `poet` command line: bad inputs give one clean error line; a tiny run works.

The module's two runs start at once as subprocesses when its first test runs; meanwhile the
commands refused before any work run through the CLI's main() in this process (a subprocess
each would pay a few seconds of imports for a one-line answer), and each test then waits for
its own. tests/test_readme_commands.py runs the pages' error examples through the installed
program.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import poet_in_process

REPO_ROOT = Path(__file__).resolve().parent.parent
QUICKSTART = "experiments/quickstart.yaml"
SMALL = ["--set", "trainer.es.population=8", "--set", "env.options.course_length=20"]
TIMEOUT_S = 300


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def poet(args: list, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess:
    """Run `python -m poet.cli ARGS` and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "poet.cli", *map(str, args)],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def assert_one_error_line(proc: subprocess.CompletedProcess, *needles: str) -> str:
    """Non-zero exit, exactly one stderr line starting `poet: error:`, naming every needle."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("poet: error: "), line
    for needle in needles:
        assert needle in line, (needle, line)
    assert proc.stdout == "", proc.stdout
    return line


# ---------------------------------------------------------------- bad inputs


def _file(d: Path, name: str, text: str) -> Path:
    path = d / name
    path.write_text(text)
    return path


def _non_empty_out(d: Path) -> list:
    existing = d / "existing"
    existing.mkdir()
    (existing / "keep.txt").write_text("precious\n")
    (existing / "records").mkdir()
    (existing / "records" / "iterations.jsonl").write_text('{"iteration": 0}\n')
    return ["run", QUICKSTART, "--out", existing, "--quiet", *SMALL]


def _check_non_empty_out_untouched(d: Path) -> None:
    existing = d / "existing"
    assert sorted(p.relative_to(existing).as_posix() for p in existing.rglob("*")) == [
        "keep.txt",
        "records",
        "records/iterations.jsonl",
    ]
    assert (existing / "keep.txt").read_text() == "precious\n"
    assert (existing / "records" / "iterations.jsonl").read_text() == '{"iteration": 0}\n'


@dataclass
class Bad:
    id: str
    args: Callable[[Path], list]  # gets the case's own empty directory
    needles: tuple[str, ...]
    after: Callable[[Path], None] | None = None


def _out(d: Path) -> list:
    return ["--out", d / "out", "--quiet"]


BAD = [
    Bad(
        "invalid_yaml",
        lambda d: ["run", _file(d, "broken.yaml", "curriculum: poet\nseed: 0\n  iterations: 3\n"), *_out(d)],
        ("broken.yaml", "not valid YAML", "line 3"),
    ),
    Bad(
        "unknown_key",
        lambda d: ["run", _file(d, "c.yaml", "curriculum: poet\niterationz: 3\n"), *_out(d)],
        ("iterationz", "unknown key"),
    ),
    Bad(
        "wrong_type",
        lambda d: ["run", _file(d, "c.yaml", "seed: abc\n"), *_out(d)],
        ("seed", "expected an integer", "abc"),
    ),
    Bad(
        "mc_bounds_reversed",
        lambda d: ["run", _file(d, "c.yaml", "reproduction:\n  mc_lower: 300\n  mc_upper: 100\n"), *_out(d)],
        ("reproduction.mc_lower", "reproduction.mc_upper"),
    ),
    Bad(
        "unknown_family",
        lambda d: ["run", _file(d, "c.yaml", "env:\n  family: nope\n"), *_out(d)],
        ("env.family", "'nope'", "terrain"),
    ),
    Bad("negative_iterations", lambda d: ["run", QUICKSTART, *_out(d), "--iterations", "-1"], ("iterations", ">= 0")),
    Bad("missing_config", lambda d: ["run", d / "nope.yaml", *_out(d)], ("nope.yaml", "does not exist")),
    Bad(
        "config_is_a_list",
        lambda d: ["run", _file(d, "list.yaml", "- mode\n- seed\n"), *_out(d)],
        ("list.yaml", "top level must be a mapping"),
    ),
    Bad("set_without_equals", lambda d: ["run", QUICKSTART, *_out(d), "--set", "foo"], ("--set", "'foo'", "key=value")),
    Bad("unknown_subcommand", lambda d: ["frobnicate"], ("invalid choice", "frobnicate")),
    Bad("bad_flag", lambda d: ["run", QUICKSTART, *_out(d), "--bogus"], ("unrecognized arguments", "--bogus")),
    Bad("no_subcommand", lambda d: [], ("required", "command")),
    Bad(
        "iterations_not_an_int",
        lambda d: ["run", QUICKSTART, *_out(d), "--iterations", "abc"],
        ("--iterations", "invalid int value", "abc"),
    ),
    Bad(
        "out_dir_not_empty",
        _non_empty_out,
        ("--out", "existing", "already holds files"),
        after=_check_non_empty_out_untouched,
    ),
    # `--set iterations 5`: argparse gives `iterations` to --set and takes `5` for CONFIG; it used to
    # say "config file '5' does not exist"
    Bad(
        "set_key_space_value",
        lambda d: ["run", "--set", "iterations", "5", *_out(d)],
        ("--set 'iterations': expected key=value", "'5'", "CONFIG", "write --set iterations=5"),
    ),
    Bad(
        "flag_and_set_give_one_field",
        lambda d: ["run", QUICKSTART, *_out(d), "--iterations", "5", "--set", "iterations=6"],
        ("iterations: given twice on the command line (--iterations 5 and --set iterations=6)",),
    ),
    Bad(
        "set_twice",
        lambda d: ["run", QUICKSTART, *_out(d), "--set", "seed=1", "--set", "seed=2"],
        ("seed: given twice on the command line (--set seed=1 and --set seed=2)",),
    ),
    Bad(
        "yaml_key_twice",
        lambda d: ["run", _file(d, "c.yaml", "seed: 1\niterations: 2\nseed: 3\n"), *_out(d)],
        ("c.yaml", "key 'seed' is given twice (lines 1 and 3)"),
    ),
    Bad(
        "empty_config",
        lambda d: ["run", _file(d, "empty.yaml", "# settings to come\n"), *_out(d)],
        ("empty.yaml", "holds no settings", "quickstart.yaml"),
    ),
    Bad(
        "trainer_options_for_es",
        lambda d: ["run", "experiments/poet_bipedal.yaml", *_out(d), "--set", "trainer.options.population=16"],
        ("trainer.options: options of the registered trainer 'es' go under trainer.es",),
    ),
    Bad(
        "unknown_curriculum_option",
        lambda d: ["run", QUICKSTART, *_out(d), "--set", "curriculum=accel", "--set", "curriculum_options.buffer_sz=4"],
        ("curriculum_options.buffer_sz: accel has no option 'buffer_sz'", "buffer_size=1000"),
    ),
    Bad(
        "unknown_env_option",
        lambda d: ["run", QUICKSTART, *_out(d), "--set", "env.options.course_len=20"],
        ("env.options.course_len: family 'terrain' has no option 'course_len'", "course_length=80.0"),
    ),
]


# ---------------------------------------------------------------- all commands, started together


@dataclass
class Jobs:
    root: Path
    futures: dict[str, Future] = field(default_factory=dict)  # the runs, as subprocesses
    done: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)  # the rest, in this process

    def result(self, name: str) -> subprocess.CompletedProcess:
        if name in self.done:
            return self.done[name]
        return self.futures[name].result(timeout=TIMEOUT_S + 60)


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    workers = min(6, max(2, os.cpu_count() or 2))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        j = Jobs(root)
        # the two real runs first: they take the longest
        j.futures["tiny_run"] = pool.submit(
            poet, ["run", QUICKSTART, "--out", root / "run", "--iterations", "3", "--quiet", *SMALL]
        )
        j.futures["no_config"] = pool.submit(
            poet,
            [
                "run",
                "--iterations",
                "1",
                "--quiet",
                "--out",
                root / "noconfig",
                "--backend",  # the Ray pool is tiny_run's
                "inprocess",
                *SMALL,
                "--set",
                "trainer.es.noise_table_size=100000",
                "--set",
                "evaluation.max_steps=100",
            ],
        )
        # while they run: the commands refused before any work, through main() in this process
        for case in BAD:
            d = root / case.id
            d.mkdir()
            j.done[case.id] = poet_in_process(case.args(d), REPO_ROOT)
        elsewhere = root / "elsewhere"
        elsewhere.mkdir()
        j.done["no_config_elsewhere"] = poet_in_process(
            ["run", "--iterations", "1", "--quiet", "--out", elsewhere / "out"], elsewhere
        )
        under_file = root / "under_file"
        under_file.mkdir()
        (under_file / "plain.txt").write_text("x\n")
        j.done["out_under_a_file"] = poet_in_process(
            ["run", QUICKSTART, "--out", under_file / "plain.txt" / "run", "--quiet", *SMALL], REPO_ROOT
        )
        yield j


@pytest.mark.parametrize("case", BAD, ids=[c.id for c in BAD])
def test_bad_input_gives_one_error_line(jobs, case):
    d = jobs.root / case.id
    assert_one_error_line(jobs.result(case.id), *case.needles)
    assert not (d / "out").exists(), "a rejected run must not create its run directory"
    if case.after is not None:
        case.after(d)


def test_bad_input_cases_cover_at_least_ten_problems():
    assert len(BAD) >= 10
    assert len({c.id for c in BAD}) == len(BAD)


def test_no_config_outside_the_project_root_is_one_error_line(jobs):
    assert_one_error_line(jobs.result("no_config_elsewhere"), "no CONFIG given", "quickstart.yaml")
    assert not (jobs.root / "elsewhere" / "out").exists()


@pytest.mark.parametrize("case_id", ["unknown_subcommand", "bad_flag", "no_subcommand"])
def test_top_level_argparse_error_points_at_a_real_help_command(jobs, case_id):
    line = jobs.result(case_id).stderr.strip()
    assert "poet poet" not in line, line


def test_out_under_a_regular_file_is_one_error_line(jobs):
    assert_one_error_line(jobs.result("out_under_a_file"), "--out", "plain.txt")


# ---------------------------------------------------------------- prepare_out_dir, in-process


def test_prepare_out_dir_refuses_a_non_empty_directory_and_leaves_it_alone(tmp_path):
    from poet.config import ConfigError
    from poet.runtime.runner import prepare_out_dir

    (tmp_path / "keep.txt").write_text("precious\n")
    with pytest.raises(ConfigError, match="already holds files"):
        prepare_out_dir(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
    assert (tmp_path / "keep.txt").read_text() == "precious\n"


def test_prepare_out_dir_refuses_a_file(tmp_path):
    from poet.config import ConfigError
    from poet.runtime.runner import prepare_out_dir

    (tmp_path / "taken.txt").write_text("x\n")
    with pytest.raises(ConfigError, match="is a file"):
        prepare_out_dir(tmp_path / "taken.txt")
    assert (tmp_path / "taken.txt").read_text() == "x\n"


def test_prepare_out_dir_accepts_an_empty_directory_and_creates_parents(tmp_path):
    from poet.runtime.runner import prepare_out_dir

    assert prepare_out_dir(tmp_path) == tmp_path
    made = prepare_out_dir(tmp_path / "a" / "b" / "run")
    assert made.is_dir() and not any(made.iterdir())


def test_prepare_out_dir_under_a_regular_file_is_a_config_error(tmp_path):
    from poet.config import ConfigError
    from poet.runtime.runner import prepare_out_dir

    (tmp_path / "plain.txt").write_text("x\n")
    with pytest.raises(ConfigError, match="plain.txt"):
        prepare_out_dir(tmp_path / "plain.txt" / "run")


# ---------------------------------------------------------------- a tiny successful run


@pytest.fixture(scope="module")
def tiny_run(jobs) -> Path:
    proc = jobs.result("tiny_run")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    return jobs.root / "run"


def test_tiny_run_writes_the_run_directory(tiny_run):
    assert (tiny_run / "config.yaml").is_file()
    assert (tiny_run / "run.json").is_file()
    assert (tiny_run / "records" / "iterations.jsonl").is_file()
    rows = [
        json.loads(line)
        for line in (tiny_run / "records" / "iterations.jsonl").read_text().splitlines()
        if line.strip()
    ]
    assert len(rows) == 3
    assert [r["iteration"] for r in rows] == [0, 1, 2]


def test_tiny_run_saves_the_resolved_config(tiny_run):
    from poet.parts import load_config

    cfg = load_config(tiny_run / "config.yaml")
    assert cfg.iterations == 3
    assert cfg.trainer.section("es")["population"] == 8
    assert cfg.trainer.section("es")["noise_table_size"] == 4_000_000  # from the YAML, beside the --set option
    assert cfg.env.options == {"course_length": 20}
    expected = load_config(
        REPO_ROOT / QUICKSTART, overrides=["trainer.es.population=8", "env.options.course_length=20", "iterations=3"]
    )
    assert cfg == expected


def test_quiet_prints_the_run_directory_and_the_closing_line(jobs, tiny_run):
    # --quiet used to print nothing at all; the closing line used to leave Ray's start out
    lines = jobs.result("tiny_run").stderr.splitlines()
    assert len(lines) == 2, lines  # no bar, no phase lines
    assert lines[0].startswith("poet: running 3 iterations of poet on terrain") and lines[0].endswith(
        f"run directory {tiny_run}"
    )
    m = re.fullmatch(
        r"done: 3 iterations in (\d+)s \(Ray start (\d+)s, iterations (\d+)s\), \d+ active pairs, "
        rf"\d+ archived, ANNECS \d+; run directory {re.escape(str(tiny_run))}",
        lines[1],
    )
    assert m, lines[1]
    assert int(m[1]) == int(m[2]) + int(m[3])


def test_version_prints_the_package_version():
    import poet as package

    proc = poet(["--version"])
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, f"poet {package.__version__}\n", "")


def test_tiny_run_json(tiny_run):
    meta = json.loads((tiny_run / "run.json").read_text())
    assert meta["family"] == "terrain"
    assert meta["curriculum"] == "poet"
    assert meta["seed"] == 0
    assert meta["policy"]["hidden"] == [40, 40]


def test_a_run_records_the_code_of_each_start(tmp_path):
    """`run.json`'s `starts`: the code (this checkout's commit) and iteration of the run's
    start and of each resume, the run's provenance."""
    import poet as package

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True).stdout.strip()
    out = tmp_path / "r"
    package.run(
        REPO_ROOT / "experiments" / "quickstart.yaml",
        out=out,
        overrides=["iterations=2", "evaluation.backend=inprocess"],
    )
    package.resume(out, iterations=3)
    starts = json.loads((out / "run.json").read_text())["starts"]
    assert [s["iteration"] for s in starts] == [0, 2]
    if not commit:  # not a git checkout: nothing to record
        assert all(s["code"] is None for s in starts)
        return
    assert all(s["code"]["commit"] == commit and isinstance(s["code"]["dirty"], bool) for s in starts)


def test_tiny_run_loads_with_analysis(tiny_run):
    from poet.analysis import load_run

    run = load_run(tiny_run)
    df = run.iterations
    assert {"iteration", "pair_id", "env_id", "score"} <= set(df.columns)
    assert list(df.columns[:4]) == ["iteration", "pair_id", "env_id", "score"]
    assert len(df) == 3
    assert sorted(df["iteration"]) == [0, 1, 2]
    assert df["score"].notna().all()
    assert run.config["iterations"] == 3


# ---------------------------------------------------------------- no CONFIG: experiments/quickstart.yaml


def test_no_config_uses_quickstart(jobs):
    from poet.parts import load_config

    proc = jobs.result("no_config")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    run_dir = jobs.root / "noconfig"
    cfg = load_config(run_dir / "config.yaml")
    quick = load_config(REPO_ROOT / QUICKSTART)
    assert cfg.iterations == 1
    # quickstart values that differ from the built-in defaults
    assert cfg.reproduction == quick.reproduction
    assert cfg.transfer == quick.transfer
    assert cfg.evaluation.eval_episodes == quick.evaluation.eval_episodes == 3
    assert cfg.evaluation.max_steps == 100  # --set still applies on top of the default config
    assert cfg.reproduction.capacity == 8 and cfg.reproduction.every == 20 and cfg.transfer.every == 10
    assert cfg.trainer.section("es") == {"population": 8, "noise_table_size": 100_000}
    rows = (run_dir / "records" / "iterations.jsonl").read_text().splitlines()
    assert len([r for r in rows if r.strip()]) == 1


# ---------------------------------------------------------------- the closing line, in-process


def test_enhanced_poets_closing_line_names_what_its_second_count_counts(tiny, tmp_path, capsys):
    # it used to say "(reference code's counter N)", which tells a reader nothing
    import poet as package

    result = package.run(tiny(curriculum="enhanced_poet", iterations=2), out=tmp_path / "r", progress=False)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith("poet: running 2 iterations of enhanced_poet")
    assert re.fullmatch(
        rf"done: 2 iterations in \d+s, \d+ active pairs, \d+ archived, ANNECS {result.annecs} "
        rf"\({result.annecs_reference} as the reference code counts: admitted envs the best archived "
        rf"agent passed the MC on\); run directory {re.escape(str(tmp_path / 'r'))}",
        lines[1],
    ), lines[1]
    assert result.ray_start_seconds == 0.0  # in process: nothing started


def test_a_level_buffer_runs_closing_line_counts_envs_solved_not_annecs(tiny, tmp_path, capsys):
    # ANNECS is POET's count of envs made by reproduction and solved; an ACCEL run's closing
    # line used to print it for every level it had solved
    import poet as package

    options = {"buffer_size": 8, "min_fill": 0.25, "num_levels": 2}
    result = package.run(
        tiny(curriculum="accel", curriculum_options=options, iterations=6), out=tmp_path / "r", progress=False
    )
    line = capsys.readouterr().err.splitlines()[-1]
    assert "ANNECS" not in line and "active pairs" not in line, line
    assert re.fullmatch(
        rf"done: 6 iterations in \d+s, {result.annecs} envs solved besides the first; "
        rf"run directory {re.escape(str(tmp_path / 'r'))}",
        line,
    ), line
