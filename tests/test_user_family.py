"""A family from the user's own package (`env.family: package.module:Factory`) with
`env.start`, from the command line, on the Ray pool; reading the run never imports it
unless the reader says so."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from poet.analysis import load_run
from tests.conftest import ROOT, tiny_config

USERPKG = ROOT / "tests" / "userpkg"


def _env(**extra) -> dict:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(USERPKG)]), **extra}


def _poet(args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "poet.cli", *args],
        cwd=ROOT,
        env=_env(**env),
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("userfamily")
    config = tmp / "cfg.yaml"
    cfg = tiny_config(
        iterations=3,
        evaluation={**tiny_config()["evaluation"], "backend": "ray"},
        ray={"workers": 2},
        checkpoint={"every": 1},
    )
    config.write_text(yaml.safe_dump(cfg))
    out = tmp / "r"
    run = _poet(
        [
            "run",
            str(config),
            "--set",
            "env.family=mypkg.families:make_family",
            "--set",
            "env.options={course_length: 25}",
            "--set",
            "env.start={roughness: 1.0, pit_gap: [], stump_height: [0.0, 0.4]}",
            "--out",
            str(out),
            "--quiet",
        ]
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_poet_run_with_a_family_from_the_users_package_and_env_start(user_run):
    run = load_run(user_run)
    assert run.iterations["iteration"].tolist() == [0, 1, 2]
    first = run.envs.iloc[0]
    assert first["roughness"] == 1.0 and first["stump_height_hi"] == 0.4 and first["pit_gap_enabled"] == 0.0
    assert run.config["env"]["family"] == "mypkg.families:make_family"


def test_reading_the_run_imports_the_users_family_only_when_trusted(user_run):
    env_id = load_run(user_run).envs["env_id"].iloc[0]
    refused = _poet(["profile", str(user_run), "--env", env_id, "--out", str(user_run / "p.png")])
    assert refused.returncode != 0 and "POET_TRUST_CODE=1" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1
    trusted = _poet(["profile", str(user_run), "--env", env_id, "--out", str(user_run / "p.png")], POET_TRUST_CODE="1")
    assert trusted.returncode == 0, trusted.stderr[-2000:]
    assert (user_run / "p.png").read_bytes()[:4] == b"\x89PNG"
    report = _poet(["report", str(user_run)])  # the report draws no courses for it, and imports nothing
    assert report.returncode == 0, report.stderr[-2000:]


def test_a_factory_that_is_not_a_family_is_one_config_error(tmp_path):
    import poet

    with pytest.raises(poet.ConfigError, match=r"env.family: 'os:getcwd' did not give an env family"):
        poet.run(tiny_config(env={"family": "os:getcwd", "options": {}}), out=tmp_path / "r")
    with pytest.raises(poet.ConfigError, match=r"env.family: cannot import env family factory module 'nope'"):
        poet.run(tiny_config(env={"family": "nope:make", "options": {}}), out=tmp_path / "r2")
