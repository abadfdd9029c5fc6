"""Opening someone else's run directory never runs code from it."""

from __future__ import annotations

import yaml

import poet
from poet.analysis import load_run
from poet.analysis.render import render_gif, render_profile_png
from poet.analysis.report import write_report

EVIL = "import pathlib\npathlib.Path(__file__).with_name('MARKER').write_text('ran')\nclass Trainer:\n    pass\n"


def test_reading_a_run_never_imports_its_trainer_module(tiny, tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    poet.run(tiny(iterations=2), out=run_dir, progress=False)
    # the run's author names a trainer module; a module of that name is importable here
    config = run_dir / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["trainer"]["name"] = "evil_trainer_module:Trainer"
    config.write_text(yaml.safe_dump(data))
    (tmp_path / "evil_trainer_module.py").write_text(EVIL)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    run = load_run(run_dir)
    write_report(run_dir)
    render_gif(run_dir, "p0", tmp_path / "p0.gif")
    render_profile_png(run_dir, run.envs["env_id"].iloc[0], tmp_path / "course.png")
    assert (tmp_path / "p0.gif").exists() and (tmp_path / "course.png").exists()
    assert not (tmp_path / "MARKER").exists()


def test_hostile_env_id_is_escaped_and_writes_nothing_outside_the_report(tiny, tmp_path):
    import json

    import pytest

    from poet.config import ConfigError

    run_dir = tmp_path / "run"
    poet.run(tiny(iterations=2), out=run_dir, progress=False)
    hostile = '../../../escaped"><script>alert(1)</script>'
    envs_file = run_dir / "records" / "envs.jsonl"
    rows = [json.loads(line) for line in envs_file.read_text().splitlines()]
    rows[0]["env_id"] = hostile
    envs_file.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = {p for p in tmp_path.rglob("*")}
    index = write_report(run_dir)
    page = index.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page
    created = {p for p in tmp_path.rglob("*")} - before
    assert created and all(p.is_relative_to(run_dir / "report") for p in created), created
    assert len(list((run_dir / "report" / "courses").glob("env-*.png"))) == 1  # the hostile id's picture, renamed
    # a `report` link planted in the run directory does not decide where the report writes
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = tmp_path / "run2"
    poet.run(tiny(iterations=1), out=other, progress=False)
    (other / "report").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_report(other)
    assert not any(elsewhere.iterdir())


def test_load_run_reads_a_live_run_with_a_torn_last_line(tiny, tmp_path):
    run_dir = tmp_path / "run"
    poet.run(tiny(iterations=2), out=run_dir, progress=False)
    table = run_dir / "records" / "iterations.jsonl"
    rows = len(table.read_text().splitlines())
    with open(table, "a") as f:
        f.write('{"iteration": 2, "pair_id": "p0", "sco')  # a row the live run is still writing
    assert len(load_run(run_dir).iterations) == rows
    assert write_report(run_dir).exists()
