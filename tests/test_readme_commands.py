"""Every command the README and the documentation pages (docs/**/*.md) show runs as written,
at small sizes.

Their code blocks are read here: each `poet ...` line runs through the installed `poet`
program from a scratch folder that has the project's `experiments/`, `notebooks/` and `docs/` (so the
pages' relative paths mean what they do at the project root), in each page's order, with
only what keeps it small added: a few iterations, rollouts in this process unless the line
says where they go, and the pages' `runs/...-...` placeholders pointing at small runs. A
`$ poet ...` line must print the error line the page shows under it. The viewers the pages
name (`tensorboard`, `mlflow ui`, `jupyter notebook`) are run by tests/test_viewers.py.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
VIEWERS = ("tensorboard", "mlflow", "jupyter")  # their --help: tests/test_viewers.py
# Placeholders the pages use for "a run directory of yours" -> the small run standing in for it.
PLACEHOLDERS = {"runs/quickstart-...": "runs/quickstart-small", "runs/ued_terrain-...": "runs/ued_terrain-small"}
# What a line gets to stay small (a later --set of the same key would be refused: only keys the line does not set).
PAPER_CONFIG_SMALL = [
    "--set",
    "trainer.es.population=8",
    "--set",
    "trainer.es.noise_table_size=100000",
    "--set",
    "evaluation.max_steps=50",
    "--set",
    "evaluation.eval_episodes=1",
]
TIMEOUT_S = 600


def pages() -> list[Path]:
    """The README and every page of the documentation site, the README first."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def readme_blocks() -> list[list[str]]:
    """The lines of each fenced code block of the README and the documentation pages."""
    blocks = []
    for page in pages():
        current = None
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                if current is None:
                    current = []
                else:
                    blocks.append(current)
                    current = None
            elif current is not None:
                current.append(line)
    return blocks


def _program(words: list[str]) -> tuple[dict[str, str], list[str]]:
    """Leading VAR=value assignments apart from the command."""
    env = {}
    while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):
        key, value = words.pop(0).split("=", 1)
        env[key] = value
    return env, words


def readme_commands() -> list[tuple[str, list[str], dict[str, str], str | None]]:
    """(line, argv, env, expected error line) of every poet and viewer command the pages show, in order."""
    out = []
    for block in readme_blocks():
        for i, line in enumerate(block):
            text = line[2:] if line.startswith("$ ") else line
            if "[CONFIG]" in text or text.rstrip().endswith("\\"):
                continue  # the usage synopsis, and continued lines (none are poet commands today)
            try:
                words = shlex.split(text, comments=True)
            except ValueError:
                continue
            env, argv = _program(words)
            if not argv or (argv[0] != "poet" and argv[0] not in VIEWERS):
                continue
            expected = block[i + 1] if line.startswith("$ ") and i + 1 < len(block) else None
            out.append((line, argv, env, expected))
    return out


def _has(argv: list[str], flag: str) -> bool:
    return any(a == flag or a.startswith(flag + "=") for a in argv)


def small(argv: list[str]) -> list[str]:
    """A page's poet command with what keeps it small added."""
    argv = [PLACEHOLDERS.get(a, a) for a in argv]
    if argv[1] != "run":
        return argv
    paper = any(a.startswith("experiments/") and a.endswith("poet_bipedal.yaml") for a in argv)
    extra = PAPER_CONFIG_SMALL if paper else []
    if not _has(argv, "--iterations"):
        extra += ["--iterations", "1" if paper else "2"]
    if not (_has(argv, "--address") or _has(argv, "--workers") or _has(argv, "--backend")):
        extra += ["--backend", "inprocess"]
    return argv + extra


def test_the_pages_show_the_commands_this_test_knows_how_to_run():
    commands = readme_commands()
    lines = [line for line, *_ in commands]
    assert any(argv[:2] == ["poet", "run"] for _, argv, _, _ in commands)
    for sub in ("resume", "report", "compare", "render", "profile"):
        assert any(argv[:2] == ["poet", sub] for _, argv, _, _ in commands), sub
    for viewer in VIEWERS:
        assert any(argv[0] == viewer for _, argv, _, _ in commands), viewer
    # every placeholder of a run directory is one this test stands a small run in for
    for line in lines:
        for found in re.findall(r"runs/[\w.-]*\.\.\.", line):
            assert found in PLACEHOLDERS, (found, line)
    # an error example shows the error line under it
    assert all(exp.startswith("poet: error: ") for _, _, _, exp in commands if exp is not None)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A folder laid out like the project root for the pages' relative paths, with small runs
    standing in for the pages' placeholders."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("experiments", "notebooks", "docs"):  # docs/examples: the pages' worked files
        (folder / name).symlink_to(ROOT / name)
    env = _env({})
    for cmd in (
        [
            "run",
            "--out",
            "runs/quickstart-small",
            "--iterations",
            "41",
            "--backend",
            "inprocess",
            "--quiet",
            "--set",
            "logging.tensorboard=true",
            "--set",
            "logging.mlflow=true",
        ],
        [
            "run",
            "experiments/ued_terrain.yaml",
            "--out",
            "runs/ued_terrain-small",
            "--iterations",
            "3",
            "--backend",
            "inprocess",
            "--quiet",
        ],
    ):
        proc = subprocess.run(
            [str(BIN / "poet"), *cmd], cwd=folder, env=env, capture_output=True, text=True, timeout=TIMEOUT_S
        )
        assert proc.returncode == 0, proc.stderr[-3000:]
    return folder


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    env.update(extra)
    return env


def _run_dirs(argv: list[str]) -> set[str]:
    """The run directories a command names (`runs/...`): commands that share one run in order.
    A `poet run` without --out writes runs/<config>-<second it started>: such runs go one at a
    time, as two started in the same second would name the same directory."""
    named = {a for a in argv if a.startswith("runs/")}
    return named | ({"runs/<config>-<date-time>"} if argv[1] == "run" and not _has(argv, "--out") else set())


@pytest.mark.slow
def test_every_poet_command_the_readme_and_the_docs_show_runs(scratch, ray_local):
    gcs = ray_local.get_runtime_context().gcs_address

    def run(line: str, argv: list[str], env: dict[str, str], expected: str | None) -> str | None:
        """Run one command of a page; None if it did what the page says, else what went wrong."""
        # a cluster's address in a page: the tests' own Ray instance, with a pool that fits it
        argv = [
            gcs if a.endswith(":6379") else ("1" if prev == "--workers" else a) for prev, a in zip([""] + argv, argv)
        ]
        extra = {"RAY_AUTH_MODE": "token"} if _has(argv, "--address") else {}
        cmd = small(argv)
        proc = subprocess.run(
            [str(BIN / "poet"), *cmd[1:]],
            cwd=scratch,
            env=_env({**env, **extra}),
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
        )
        if expected is not None:
            last = proc.stderr.strip().splitlines()[-1:] or [""]
            if proc.returncode != 2 or last[0] != expected:
                return f"{line}\n  expected exit 2 and: {expected}\n  got {proc.returncode}: {last[0]}"
        elif proc.returncode != 0:
            return f"{line}\n  ran as: {shlex.join(cmd)}\n  exit {proc.returncode}: {proc.stderr[-1500:]}"
        return None

    # Two commands at a time; a command that names a run directory an earlier one names waits
    # for it (a resume after its run, a compare after both runs), so each page's order holds
    # wherever it matters.
    commands = [c for c in readme_commands() if c[1][0] == "poet"]
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures: list[Future] = []
        for i, (line, argv, env, expected) in enumerate(commands):
            before = [futures[j] for j in range(i) if _run_dirs(commands[j][1]) & _run_dirs(argv)]

            def after(before=before, args=(line, argv, env, expected)) -> str | None:
                for f in before:
                    f.result()
                return run(*args)

            futures.append(pool.submit(after))
        failures = [f.result() for f in futures]
    failures = [f for f in failures if f is not None]
    assert not failures, "\n".join(failures)
