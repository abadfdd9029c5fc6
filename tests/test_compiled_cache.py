"""numba's cache dropped when a package's numba sources change (envs/compiled_cache.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from envs.compiled_cache import STAMP, drop_stale_cache

ROOT = Path(__file__).resolve().parents[1]


def _fake_cache(package: Path) -> list[Path]:
    files = [package / "__pycache__" / "a.f-3.py311.nbi", package / "sub" / "__pycache__" / "b.g-9.py311.1.nbc"]
    for path in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"compiled")
    return files


def test_the_cache_goes_when_a_numba_source_changes_and_only_then(tmp_path) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "a.py").write_text("import numba\n")
    (package / "sub" / "b.py").write_text("from numba import njit\n")
    (package / "plain.py").write_text("x = 1\n")
    files = _fake_cache(package)
    assert drop_stale_cache(package)  # no stamp yet: the cache predates the check
    assert not any(f.exists() for f in files) and (package / "__pycache__" / STAMP).exists()
    files = _fake_cache(package)
    assert not drop_stale_cache(package)
    (package / "plain.py").write_text("x = 2\n")  # no numba in it: nothing compiled from it
    assert not drop_stale_cache(package) and all(f.exists() for f in files)
    (package / "sub" / "b.py").write_text("from numba import njit  # edited\n")
    assert drop_stale_cache(package) and not any(f.exists() for f in files)
    assert not drop_stale_cache(package)


def _package(root: Path, checked: bool) -> None:
    # `g` holds a compiled copy of `f`, from another file: numba's own stamps miss an edit of `f`
    package = root / "pkg"
    package.mkdir()
    init = "from pathlib import Path\nfrom envs.compiled_cache import drop_stale_cache\n"
    (package / "__init__.py").write_text(init + "drop_stale_cache(Path(__file__).parent)\n" if checked else "")
    (package / "a.py").write_text("import numba\n\n@numba.njit(cache=True)\ndef f():\n    return 1\n")
    (package / "b.py").write_text(
        "import numba\nfrom pkg.a import f\n\n@numba.njit(cache=True)\ndef g():\n    return f() + 10\n"
    )


def _g(root: Path) -> int:
    code = "import pkg.b; print(pkg.b.g())"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(ROOT)])}
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_a_function_compiled_with_another_files_function_sees_its_edit(tmp_path) -> None:
    for checked in (True, False):
        root = tmp_path / str(checked)
        root.mkdir()
        _package(root, checked)
        assert _g(root) == 11  # compiled and cached
        a = root / "pkg" / "a.py"
        a.write_text(a.read_text().replace("return 1", "return 2"))
        # with the check the edit shows; without it numba loads g's stale copy of f
        assert _g(root) == (12 if checked else 11)
