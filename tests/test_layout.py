"""The layers of docs/architecture.md: every import of the project goes down or sideways, never up."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# lowest first; a module belongs to the first layer with a prefix of its dotted name
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("envs", ("envs",)),
    (
        "base",
        (
            "poet.config",
            "poet.errors",
            "poet.seeding",
            "poet.plugins",
            "poet.policies",
            "poet.dense",
            "poet.ranking",
            "poet.version",
        ),
    ),
    ("evaluation", ("poet.evaluation",)),
    ("trainers", ("poet.trainers",)),
    (
        "run state",
        ("poet.pair", "poet.population", "poet.scoring", "poet.state", "poet.records", "poet.context", "poet.heldout"),
    ),
    ("curricula", ("poet.curricula",)),
    ("parts", ("poet.parts",)),
    ("runtime", ("poet.runtime",)),
    ("analysis", ("poet.analysis",)),
    ("cli", ("poet.cli",)),
    ("facade", ("poet",)),  # the package itself: poet.run, poet.resume, poet.analysis
]
FACADE = "poet"  # its layer holds that one module, not the modules under it


def layer_of(module: str) -> int | None:
    for rank, (_, prefixes) in enumerate(LAYERS):
        if any(module == p or (module.startswith(p + ".") and p != FACADE) for p in prefixes):
            return rank
    return None


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def project_files() -> list[Path]:
    return sorted(p for d in ("poet", "envs") for p in (ROOT / d).rglob("*.py"))


def imports(path: Path, name: str) -> list[tuple[int, str]]:
    """(line, imported module) for every import of the file, at any depth (lazy ones too)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            # `from poet.runtime import checkpoint` imports poet.runtime.checkpoint
            out += [(node.lineno, f"{base}.{alias.name}") for alias in node.names] or [(node.lineno, base)]
    return out


def test_every_module_of_the_project_has_a_layer():
    unplaced = [module_name(p) for p in project_files() if layer_of(module_name(p)) is None]
    assert not unplaced, f"modules in no layer of docs/architecture.md: {unplaced}"


def upward_imports(modules: list[tuple[Path, str]]) -> list[str]:
    """'file:line (layer) imports target (layer)' for each import that goes up a layer."""
    upward = []
    for path, name in modules:
        here = layer_of(name)
        for line, target in imports(path, name):
            there = layer_of(target)
            if there is None:
                there = layer_of(target.rpartition(".")[0])  # `from pkg import name`
            if there is not None and there > here:
                upward.append(f"{path.name}:{line} ({LAYERS[here][0]}) imports {target} ({LAYERS[there][0]})")
    return upward


def test_no_import_runs_from_a_lower_layer_to_a_higher_one():
    assert not (upward := upward_imports([(p, module_name(p)) for p in project_files()])), "\n".join(upward)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    """The check can fail: a lazy runtime import inside a trainer is caught."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from poet.runtime.runner import run\n")
    assert upward_imports([(probe, "poet.trainers.probe")]) == [
        "probe.py:2 (trainers) imports poet.runtime.runner.run (runtime)"
    ]


def test_no_module_of_the_project_opens_a_socket_of_its_own():
    """Ray carries every call between the driver and its workers: nothing imports `socket` or
    `multiprocessing.connection`, but the address check that runs before Ray is joined
    imports `socket` (one TCP connection, then closed)."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in project_files()
        for line, target in imports(path, module_name(path))
        if (target.split(".")[0] == "socket" and module_name(path) != "poet.runtime.ray_session")
        or target.startswith("multiprocessing.connection")
    ]
    assert not offenders, offenders


def test_no_module_of_the_project_imports_a_private_ray_module():
    """Only Ray's public API: a private module (`ray._private`, `ray._raylet`, generated
    protobufs) may move in any minor release of the Ray versions pyproject.toml accepts."""
    offenders = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in project_files()
        for line, target in imports(path, module_name(path))
        if target.startswith("ray.") and ("._" in target or target.startswith("ray.core.generated"))
    ]
    assert not offenders, offenders
    assert not [p for p in project_files() if "ray._" in p.read_text()], "a private Ray name outside an import"


MAX_FUNCTION_LINES = 80


def test_no_function_of_the_package_is_longer_than_80_lines():
    """A function a researcher reads fits a screen or two; a longer one is steps to be named."""
    offenders = [
        f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for path in sorted((ROOT / "poet").rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES
    ]
    assert not offenders, offenders


def test_the_evaluation_layer_names_no_family():
    """A family's fast path comes through the family protocol (`row_kernel`): the evaluators
    are the same code whatever family runs."""
    names = ("terrain", "bipedal", "cartpole", "cppn")
    offenders = [
        f"{path.relative_to(ROOT)} names {name}"
        for path in sorted((ROOT / "poet" / "evaluation").rglob("*.py"))
        for name in names
        if name in path.read_text().lower()
    ]
    assert not offenders, offenders
