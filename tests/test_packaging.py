"""`make` installs every optional extra pyproject.toml declares, pinned by constraints.txt."""

from __future__ import annotations

import re

import pytest

from tests.conftest import ROOT


def test_make_installs_every_extra_and_constraints_pin_their_packages():
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    installed = re.search(r"-e '\.\[([^\]]*)\]'", (ROOT / "Makefile").read_text()).group(1).split(",")
    assert sorted(installed) == sorted(extras)
    pinned = {
        line.split("==")[0].strip().lower()
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    for requirement in [*project["dependencies"], *(r for reqs in extras.values() for r in reqs)]:
        name = re.match(r"[A-Za-z0-9_.-]+", requirement).group(0).lower()
        assert name in pinned, f"{name} has no pin in constraints.txt"


def test_make_run_installs_only_what_a_run_needs():
    """`make run` installs the package without extras; `make test` every extra on top."""
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^run: \$\(RUN_STAMP\)$", makefile, re.M)
    run_recipe = makefile.split("$(RUN_STAMP): pyproject.toml constraints.txt", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"-e \. \$\(EDITABLE\)$", run_recipe, re.M) and "[" not in run_recipe.split("-e", 1)[1]
    assert re.search(r"^\$\(STAMP\): \$\(RUN_STAMP\)$", makefile, re.M)


def test_a_folder_named_poet_on_pythonpath_does_not_shadow_the_package(tmp_path):
    """A clone's own folder is often named `poet`; on PYTHONPATH it was an empty namespace
    package that hid the installed one (`cannot import name '__version__'`)."""
    import os
    import subprocess
    import sys

    (tmp_path / "poet").mkdir()
    proc = subprocess.run(
        [sys.executable, "-c", "from poet import __version__; print(__version__)"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr
