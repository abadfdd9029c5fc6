"""The README and the documentation site: the README stays short and cites the papers, every
config field is in the configuration reference, and every number of a generated table or of a
page's prose is the number in its results file (`docs/hooks/`: both are filled in when the
site is built)."""

from __future__ import annotations

import dataclasses
import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "docs" / "hooks"))
import docs_config  # noqa: E402
import docs_hook  # noqa: E402
import docs_tables  # noqa: E402
import study_tables  # noqa: E402

README_LIMIT = 12 * 1024
ARXIV = {"POET": "https://arxiv.org/abs/1901.01753", "Enhanced POET": "https://arxiv.org/abs/2003.08536"}
NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


# ---------------------------------------------------------------- quoted output

# The start of a command line in a page's code block (what the reader types, not what prints).
COMMAND_START = ("poet ", "$ ", "make", "pip", "#", "python", "git ", "ray ", "cd ", "export ", "tensorboard")
COMMAND_START += ("mlflow", "jupyter", "RAY_", "POET_", "MLFLOW_", "PYTHONPATH=", ".venv", "usage:", "  ")


def quoted_output() -> list[tuple[str, str, list[str], int]]:
    """(page, line, block, index) of every line a page's plain code block shows as a program's output."""
    from tests.test_readme_commands import pages

    out = []
    for page in pages():
        block, plain = None, False
        for line in page.read_text().splitlines():
            if line.startswith("```"):
                if block is None:
                    block, plain = [], line[3:].strip() in ("", "text", "console", "bash", "sh")
                    continue
                if plain:
                    for i, text in enumerate(block):
                        if text and not text.startswith(COMMAND_START) and not text.endswith((".gif", ".png")):
                            out.append((str(page.relative_to(ROOT)), text, block, i))
                block = None
            elif block is not None:
                block.append(line)
    return out


def test_every_output_a_page_quotes_is_checked_against_the_command():
    """Each output line the pages quote is one a test compares with what its command prints:
    the quickstart's lines (tests/test_run.py::test_quickstart_shows_poet_working), an error
    line under its `$ poet ...` (tests/test_readme_commands.py), or a line whose every
    number is a placeholder (`<return>`, `T`)."""
    from tests.test_run import QUICKSTART_OUTPUT

    quickstart = {
        line
        for page in ("README.md", "docs/getting-started.md")
        for line in QUICKSTART_OUTPUT.search((ROOT / page).read_text()).group(1).splitlines()
    }
    unchecked = []
    for page, line, block, i in quoted_output():
        if line in quickstart and page in ("README.md", "docs/getting-started.md"):
            continue
        if line.startswith("poet: error: ") and i > 0 and block[i - 1].startswith("$ poet "):
            continue
        if not re.search(r"(?<!\w)-?\d", re.sub(r"<[^>]*>", "", line)):  # p3 is a name, not a number
            continue
        unchecked.append(f"{page}: {line}")
    assert not unchecked, "quoted output no test checks:\n" + "\n".join(unchecked)


# ---------------------------------------------------------------- README and citation


def test_readme_is_short_and_links_both_papers_and_a_citation():
    readme = (ROOT / "README.md").read_bytes()
    assert len(readme) <= README_LIMIT, f"README.md is {len(readme)} bytes; the limit is {README_LIMIT}"
    text = readme.decode()
    for paper, link in ARXIV.items():
        assert link in text, paper
    assert "## Citing" in text and "@article{" in text and "CITATION.cff" in text


def test_citation_cff_is_valid_yaml_naming_the_software_and_both_papers():
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["cff-version"] == "1.2.0" and cff["title"] and cff["message"]
    assert cff["authors"] and all(a.get("name") or a.get("family-names") for a in cff["authors"])
    urls = {ref["url"] for ref in cff["references"]}
    assert set(ARXIV.values()) <= urls
    assert all(ref["title"] and ref["authors"] and ref["year"] for ref in cff["references"])


def test_the_readmes_links_into_docs_name_files_that_exist():
    for link in re.findall(r"\]\((docs/[^)#\s]+)", (ROOT / "README.md").read_text()):
        assert (ROOT / link).is_file(), link


# ---------------------------------------------------------------- configuration reference


def _every_key(cls: type, prefix: str = "") -> list[str]:
    """Every leaf field of a config dataclass, dotted, read from the dataclass itself."""
    keys = []
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(f.default_factory):
            keys += _every_key(f.default_factory, f"{prefix}{f.name}.")
        elif not f.metadata.get("inline"):  # trainer.es, trainer.ppo: the trainers' own tables
            keys.append(f"{prefix}{f.name}")
    return keys


def test_every_config_field_is_in_the_configuration_reference():
    from poet.config import RunConfig
    from poet.curricula import CURRICULA
    from poet.policies.kinds import POLICY_KINDS, options_class, resolve_kind
    from poet.trainers import TRAINERS

    page = docs_config.markdown()
    expected = _every_key(RunConfig)
    expected += [k for name, cls in TRAINERS.items() for k in _every_key(cls.Options, f"trainer.{name}.")]
    expected += [
        k
        for cls in CURRICULA.values()
        if hasattr(cls, "Options")
        for k in _every_key(cls.Options, "curriculum_options.")
    ]
    expected += [
        k
        for name in POLICY_KINDS
        if name != "mlp" and options_class(resolve_kind(name)) is not None
        for k in _every_key(options_class(resolve_kind(name)), "policy.options.")
    ]
    missing = [k for k in expected if f"| `{k}`" not in page]
    assert not missing, missing
    assert set(expected) == set(docs_config.all_keys())
    assert docs_hook.CONFIG in (ROOT / "docs" / "configuration.md").read_text()


def test_the_configuration_reference_states_the_bounds_the_checks_enforce():
    from poet.config import ConfigError
    from poet.parts import load_config

    fields = {f.key: f for s in docs_config.sections() for f in s.fields}
    assert fields["evaluation.max_steps"].bounds == "must be in [1, 10,000,000]"
    assert fields["reproduction.mc_lower"].bounds == "must be <= reproduction.mc_upper"
    assert fields["trainer.es.population"].bounds == "must be an even number >= 2 (mirrored pairs)"
    assert fields["ray.workers"].where_only and not fields["trainer.es.lr"].where_only
    # a bound the page states is the one a run enforces
    with pytest.raises(ConfigError, match=re.escape("evaluation.test_every: must be >= 0")):
        load_config(data={"evaluation": {"test_every": -1}})
    assert fields["evaluation.test_every"].bounds.startswith("must be >= 0")


# ---------------------------------------------------------------- generated tables


def _pages() -> list[Path]:
    return sorted((ROOT / "docs").rglob("*.md"))


def _markers() -> dict[str, Path]:
    """Table name -> the page that shows it."""
    found = {}
    for page in _pages():
        for name in docs_hook.TABLE.findall(page.read_text()):
            assert name not in found, f"table {name} shown twice"
            found[name] = page
    return found


def test_every_generated_table_is_shown_once_and_every_marker_names_one():
    assert set(_markers()) == set(docs_hook.TABLES)
    assert not set(docs_tables.TABLES) & set(study_tables.TABLES), "a study table would hide another"


def _decimals(fmt: str, shown: float) -> float:
    """Half a unit of the last digit `fmt` shows: the largest rounding error of the text."""
    if fmt.endswith("g"):
        digits = int(re.search(r"\.(\d+)", fmt).group(1))
        return 0.5 * 10 ** (int(f"{abs(shown):e}".split("e")[1]) - digits + 1) if shown else 0.5e-12
    match = re.search(r"\.(\d+)f", fmt)
    return 0.5 * 10 ** -(int(match.group(1)) if match else 0)


def check_cell(cell: docs_tables.Cell) -> None:
    """The cell's number, read from its text, is the value at its key in its file (read here,
    not through the generator), up to the rounding its format shows."""
    value = docs_tables.lookup(json.loads((ROOT / cell.source).read_text()), cell.key)
    number = float(NUMBER.search(cell.text).group(0).replace(",", ""))
    expected = value * cell.scale
    assert abs(number - expected) <= _decimals(cell.fmt, expected) * 1.0001, (cell, value)


@pytest.mark.parametrize("name", sorted(docs_hook.TABLES))
def test_every_number_of_a_generated_table_is_its_json_sources(name):
    table = docs_hook.TABLES[name]()
    cells = [cell for row in table.rows for cell in row if cell.source is not None]
    assert cells, f"table {name} has no number read from a file"
    for cell in cells:
        check_cell(cell)
    assert all(s.startswith(("benchmarks/results/", "experiments/results/")) for s in table.sources)


def test_a_number_that_differs_from_its_file_fails_the_check():
    cell = next(c for row in docs_tables.quickstart().rows for c in row if c.key == "annecs")
    check_cell(cell)
    annecs = int(cell.text)
    for stale in (str(annecs + 1), str(annecs - 1), f"{annecs}.6"):
        with pytest.raises(AssertionError):
            check_cell(dataclasses.replace(cell, text=stale))
    ratio = next(
        c for row in docs_tables.eval_pool_ratios().rows for c in row if c.key and c.key.endswith("efficiency")
    )
    with pytest.raises(AssertionError):
        check_cell(dataclasses.replace(ratio, text=f"{float(ratio.text) + 0.01:.2f}"))


def _cells(markdown: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip().strip("|").split("|")]
        for line in markdown.splitlines()
        if line.startswith("|")
    ]


def test_the_study_tables_are_the_ones_the_study_script_writes():
    """The study's own results.md, written by experiments/reproduce_poet.py from the same JSON."""
    written = _cells((ROOT / "experiments" / "results" / "reproduce_poet" / "results.md").read_text())
    generated = [row for make in study_tables.TABLES.values() for row in _cells(make().markdown())]
    assert generated == written


# ---------------------------------------------------------------- numbers in the prose

# A value or ratio marker as docs_hook.py documents it, parsed here rather than by the hook.
PROSE_NUMBER = re.compile(r"<!-- (value|ratio): (.*?) -->")


def _number_markers() -> list[tuple[Path, re.Match]]:
    """(page, marker) for every value and ratio marker of the site's pages."""
    return [(page, m) for page in _pages() for m in PROSE_NUMBER.finditer(page.read_text())]


def _expected_number(marker: re.Match) -> str:
    """What a marker must show: its value (or A / B), read here from its file, formatted."""
    kind, (path, *keys, fmt) = marker.group(1), marker.group(2).split()
    assert len(keys) == (2 if kind == "ratio" else 1), marker.group(0)
    assert path.startswith(("benchmarks/results/", "experiments/results/")), marker.group(0)
    data = json.loads((ROOT / path).read_text())
    values = [docs_tables.lookup(data, key) for key in keys]
    return format(values[0] / values[1] if kind == "ratio" else values[0], fmt)


def test_the_prose_states_measured_numbers_through_markers():
    assert len(_number_markers()) >= 10, "the pages' prose reads its measured numbers from the results"
    # GitHub shows the README as it is: a marker there would never be filled
    assert not PROSE_NUMBER.search((ROOT / "README.md").read_text())


@pytest.mark.parametrize("page", sorted({p.relative_to(ROOT).as_posix() for p, _ in _number_markers()}))
def test_every_number_in_the_prose_is_its_json_sources(page):
    """The filled page is the page with each marker replaced by the formatted value in its file."""
    text = (ROOT / page).read_text()
    assert docs_hook.fill_numbers(text) == PROSE_NUMBER.sub(_expected_number, text)
    filled = docs_hook.fill(text)
    assert "<!-- value:" not in filled and "<!-- ratio:" not in filled


def test_a_marker_fills_in_its_number():
    data = json.loads((ROOT / "benchmarks/results/backends_quickstart.json").read_text())
    marker = "<!-- value: benchmarks/results/backends_quickstart.json median.ray.wall_seconds .1f -->"
    assert docs_hook.fill(f"took {marker} s\n") == f"took {data['median']['ray']['wall_seconds']:.1f} s\n"
    marker = "<!-- ratio: benchmarks/results/backends_quickstart.json median.ray.wall_seconds median.inprocess.wall_seconds .3f -->"
    ratio = data["median"]["ray"]["wall_seconds"] / data["median"]["inprocess"]["wall_seconds"]
    assert docs_hook.fill(f"{marker}x\n") == f"{ratio:.3f}x\n"


@pytest.mark.parametrize(
    ("marker", "why"),
    [
        ("<!-- value: benchmarks/results/backends_quickstart.json median.ray.no_such_key .1f -->", "no_such_key"),
        ("<!-- value: benchmarks/results/no_such_file.json median.ray.wall_seconds .1f -->", "no_such_file.json"),
        ("<!-- value: benchmarks/results/backends_quickstart.json runs.ray.9.wall_seconds .1f -->", "IndexError"),
        ("<!-- ratio: benchmarks/results/backends_quickstart.json annecs median.no_such_key .2f -->", "no_such_key"),
        ("<!-- value: benchmarks/results/backends_quickstart.json median.ray .1f -->", "not a number"),
        ("<!-- value: benchmarks/results/backends_quickstart.json annecs -->", "takes PATH KEY FORMAT"),
    ],
)
def test_a_marker_naming_a_missing_file_or_key_stops_the_build_naming_it(marker, why):
    with pytest.raises(ValueError, match=re.escape(marker)) as error:
        docs_hook.fill(f"The run took {marker} s.\n")
    assert why in str(error.value)


def _built(site: Path, page: Path) -> Path:
    """Where mkdocs writes a page (directory URLs: docs/a/b.md -> site/a/b/index.html)."""
    rel = page.relative_to(ROOT / "docs").with_suffix("")
    folder = rel.parent if rel.name == "index" else rel
    return site / folder / "index.html"


def _shown(site: Path, page: Path) -> str:
    """A built page's text as the reader sees it (tags and entities gone)."""
    return re.sub(r"<[^>]+>", "", html.unescape(_built(site, page).read_text()))


@pytest.mark.slow
def test_the_built_site_shows_every_page_and_every_generated_number(tmp_path):
    # `make test` builds the site (`make docs`, strict) just before the tests and says where:
    # read that build; run alone, the test builds its own
    site = Path(os.environ.get("POET_BUILT_SITE") or tmp_path / "site")
    if not os.environ.get("POET_BUILT_SITE"):
        built = subprocess.run(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
            cwd=ROOT,
            env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert built.returncode == 0, built.stderr[-3000:]
    for page in _pages():
        assert _built(site, page).is_file(), page
    for name, page in _markers().items():
        shown = _shown(site, page)
        for row in docs_hook.TABLES[name]().rows:
            for cell in row:
                if cell.source is not None:
                    assert cell.text.replace("`", "") in shown, (name, cell.text)
    for page, marker in _number_markers():
        assert _expected_number(marker) in _shown(site, page), (page, marker.group(0))
    api = (site / "api" / "run" / "index.html").read_text()
    assert "poet.runtime.runner.run" in api and "poet.runtime.runner.resume" in api


# -------------------------------------------------------- the study's descriptive comparisons
DESCRIPTIVE = "<!-- comparisons: descriptive -->"
# a p-value reported for a comparison: "p = 0.004", "p < 0.05", "Holm p 0.02", a table column
# named p; not the smallest p a design can give ("no p below 0.125")
P_VALUE = re.compile(r"\bp\s*(?:=|<|≤|<=)\s*\d|\bHolm[- ]adjusted p\b|\bHolm p\b|\|\s*p(?: \([^|]*\))?\s*\|", re.I)


def descriptive_sections(markdown: str) -> dict[str, str]:
    """The page's sections (any heading below the title) that declare their comparisons
    descriptive, by heading."""
    parts = re.split(r"^#{2,} ", markdown, flags=re.MULTILINE)[1:]
    return {p.splitlines()[0]: p for p in parts if DESCRIPTIVE in p}


def test_no_p_value_appears_for_a_comparison_the_study_page_declares_descriptive():
    page = docs_hook.fill((ROOT / "docs" / "study.md").read_text())
    sections = descriptive_sections(page)
    assert {"POET against its controls", "Enhanced POET's claim"} <= set(sections)
    for heading, text in sections.items():
        assert not P_VALUE.search(text), f"study.md, {heading!r}: a p-value in a descriptive section"
    # the check itself finds a p-value in a declared section, in prose and as a table column
    for leak in ("so p = 0.004 here", "| class | p (sign-flip) | Holm p |", "at p < 0.05"):
        assert P_VALUE.search(leak), leak
    assert not P_VALUE.search("3 seeds cannot give a p below 0.125")
