"""The programs the docs (docs/analysis.md) show a run with: `tensorboard`, `mlflow ui` and `jupyter notebook`
installed next to this interpreter (`make` installs the `viewers` extra), MLflow reading a run's
file store the docs' way, and the analysis notebook run from a copy outside the repository.

One tiny run with both logger sinks (module fixture) serves every test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import poet
from poet.analysis import load_run
from poet.analysis.report import FIGURES
from tests.conftest import ROOT, tiny_config
from tests.test_report import NOTEBOOK, _this_python_kernel

BIN = Path(sys.executable).parent  # the environment's scripts, beside its interpreter
ITERATIONS = 4
# cells 0-2: the notebook's description and the lookup of its run directory (RUN_DIR)
LOOKUP_CELLS = 3


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A 4-iteration POET run writing TensorBoard event files and an MLflow file store."""
    out = tmp_path_factory.mktemp("viewers") / "run"
    poet.run(tiny_config(iterations=ITERATIONS, logging={"tensorboard": True, "mlflow": True}), out=out, progress=False)
    return out


def _clean_env(**extra: str) -> dict[str, str]:
    """This process's environment less MLFLOW_ALLOW_FILE_STORE (the MLflow sink sets it here), plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_ALLOW_FILE_STORE"}
    return {**env, **extra}


# ---------------------------------------------------------------- programs


@pytest.mark.parametrize(
    "command, expected",
    [
        (["tensorboard", "--help"], "usage: tensorboard"),
        (["mlflow", "ui", "--help"], "Usage: mlflow ui"),
        (["jupyter", "notebook", "--help"], "Jupyter Notebook"),
    ],
)
def test_viewer_programs_are_installed(command: list[str], expected: str):
    program = BIN / command[0]
    assert program.is_file(), f"{program} missing: `make install` installs the viewers extra"
    proc = subprocess.run([str(program), *command[1:]], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert expected in proc.stdout, proc.stdout[:500]


def test_mlflow_server_serves_its_ui_pages():
    """`mlflow ui`'s app answers / with the UI's page (mlflow-skinny has neither the app nor the page)."""
    script = (
        "from mlflow.server import app\n"
        "client = app.test_client()\n"
        "page, health = client.get('/'), client.get('/health')\n"
        "print(page.status_code, health.status_code, page.data[:200].decode())\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("200 200 ") and "<html" in proc.stdout, proc.stdout


# ---------------------------------------------------------------- MLflow store

READ_STORE = """
import json, sys
from mlflow import MlflowClient

client = MlflowClient(tracking_uri=sys.argv[1])
run = client.get_run(sys.argv[2])
annecs = client.get_metric_history(run.info.run_id, "run/annecs")
scores = client.get_metric_history(run.info.run_id, "score/p0")
print(json.dumps({"status": run.info.status, "keys": sorted(run.data.metrics),
                  "annecs": sorted((m.step, m.value) for m in annecs),
                  "scores": sorted((m.step, m.value) for m in scores)}))
"""


def test_mlflow_reads_the_runs_file_store_with_the_readmes_switch(run_dir):
    """`MLFLOW_ALLOW_FILE_STORE=true` and the store's path relative to the folder above the run, as the
    docs' `mlflow ui --backend-store-uri runs/.../mlruns` has it; without the switch MLflow 3 refuses."""
    run_id = (run_dir / "mlflow_run_id").read_text().strip()
    args = [sys.executable, "-c", READ_STORE, f"{run_dir.name}/mlruns", run_id]
    proc = subprocess.run(
        args,
        cwd=run_dir.parent,
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(MLFLOW_ALLOW_FILE_STORE="true"),
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    run = load_run(run_dir)
    assert got["status"] == "FINISHED"
    assert {"score/p0", "run/annecs", "run/active", "run/env_steps_per_s"} <= set(got["keys"])
    assert [step for step, _ in got["annecs"]] == list(range(ITERATIONS))
    assert got["annecs"][-1][1] == float(run.annecs.iloc[-1])
    own = run.iterations[run.iterations["pair_id"] == "p0"].sort_values("iteration")
    assert [step for step, _ in got["scores"]] == own["iteration"].tolist()
    assert [value for _, value in got["scores"]] == pytest.approx(own["score"].tolist(), rel=1e-12)

    refused = subprocess.run(args, cwd=run_dir.parent, capture_output=True, text=True, timeout=300, env=_clean_env())
    assert refused.returncode != 0 and "MLFLOW_ALLOW_FILE_STORE" in refused.stderr


# ---------------------------------------------------------------- notebook


def _execute(path: Path, cells: int | None = None) -> nbformat.NotebookNode:
    """The notebook at `path` (its first `cells` cells if given) executed in its own folder."""
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    if cells is not None:
        nb.cells = nb.cells[:cells]
    client = NotebookClient(
        nb,
        km=_this_python_kernel(),
        kernel_name="python3",
        timeout=120,
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    return nb


def _text(nb: nbformat.NotebookNode) -> str:
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    return "".join(o.get("data", {}).get("text/plain", "") + o.get("text", "") for o in outputs)


def _copy_notebook(folder: Path) -> Path:
    """A copy of the repository's notebook in `folder` (outside the repository)."""
    assert ROOT not in folder.resolve().parents
    folder.mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy(NOTEBOOK, folder / NOTEBOOK.name))


def test_notebook_copied_out_of_the_repository_runs_with_poet_run_dir(run_dir, tmp_path, monkeypatch):
    copy = _copy_notebook(tmp_path / "elsewhere")
    monkeypatch.setenv("POET_RUN_DIR", str(run_dir))
    monkeypatch.setenv("PWD", str(copy.parent))  # as if jupyter were started there
    nb = _execute(copy)
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) == len(FIGURES) + 2  # + cross-eval, robustness
    text = _text(nb)
    assert str(run_dir) in text and "env_id" in text and "no agents" not in text and "no robustness" not in text


def test_notebook_poet_run_dir_relative_to_where_jupyter_started(run_dir, tmp_path, monkeypatch):
    """`POET_RUN_DIR=runs/x jupyter notebook notebooks/analyze_run.ipynb`: the kernel runs in notebooks/,
    the path is relative to the shell's folder (PWD) or a folder above the notebook's."""
    copy = _copy_notebook(tmp_path / "notebooks")
    monkeypatch.setenv("POET_RUN_DIR", run_dir.name)
    monkeypatch.setenv("PWD", str(run_dir.parent))
    assert _text(_execute(copy, LOOKUP_CELLS)).strip() == str(run_dir.resolve())

    workspace = tmp_path / "workspace"  # the run under the notebook folder's parent
    shutil.copytree(run_dir, workspace / "runs" / "r1")
    copy = _copy_notebook(workspace / "notebooks")
    monkeypatch.setenv("POET_RUN_DIR", "runs/r1")
    monkeypatch.setenv("PWD", str(tmp_path))
    assert _text(_execute(copy, LOOKUP_CELLS)).strip() == str((workspace / "runs" / "r1").resolve())

    from nbclient.exceptions import CellExecutionError

    monkeypatch.setenv("POET_RUN_DIR", "runs/nope")
    with pytest.raises(CellExecutionError, match="POET_RUN_DIR=runs/nope: no such folder"):
        _execute(copy, LOOKUP_CELLS)


def test_notebook_without_poet_run_dir_opens_the_newest_run_under_runs(run_dir, tmp_path, monkeypatch):
    from nbclient.exceptions import CellExecutionError

    monkeypatch.delenv("POET_RUN_DIR", raising=False)
    repo = tmp_path / "repo"
    copy = _copy_notebook(repo / "notebooks")
    (repo / "runs").mkdir()
    with pytest.raises(CellExecutionError, match="no run directories under .*runs; run `make run` or set POET_RUN_DIR"):
        _execute(copy, LOOKUP_CELLS)

    old = repo / "runs" / "old"
    (old / "records").mkdir(parents=True)
    for path in (old, old / "records"):
        os.utime(path, (1_000_000_000, 1_000_000_000))
    shutil.copytree(run_dir, repo / "runs" / "new")
    assert _text(_execute(copy, LOOKUP_CELLS)).strip() == str((repo / "runs" / "new").resolve())
