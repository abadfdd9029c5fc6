"""Opening someone else's run directory never runs code from it."""
from __future__ import annotations

import yaml

import poet
from poet.analysis import load_run
from poet.render import render_gif, render_profile_png
from poet.report import write_report

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
