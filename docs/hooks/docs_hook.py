"""mkdocs hook: fills the generated parts of the pages and adds the study's figures.

* `<!-- table: NAME -->` on a line of its own becomes the table `TABLES[NAME]` builds from
  its results file (the generators of `docs_tables` and, for the study's page, `study_tables`);
* `<!-- value: PATH KEY FORMAT -->`, anywhere in a line, becomes the number at KEY in the
  results file PATH, formatted, so prose states a measured number without typing it: PATH
  is relative to the repository root (`benchmarks/results/backends_quickstart.json`), KEY a
  dotted key as `docs_tables.lookup` takes it (`median.ray.wall_seconds`, `runs.0.seconds`;
  no spaces) and FORMAT a Python format spec (`.1f`, `,.0f`, `d`);
* `<!-- ratio: PATH KEY_A KEY_B FORMAT -->` becomes the number at KEY_A over the one at
  KEY_B, formatted, for a ratio the file does not hold itself;
* a missing file or key, a value that is not a number or a malformed marker stops the
  build with an error naming the marker;
* `<!-- config-reference -->` becomes the configuration reference (`docs_config`);
* the figures the study writes next to its results (`EXTERNAL_FILES`) join the site under
  `results/`, so pages show them where the study keeps them.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HOOKS = Path(__file__).resolve().parent
ROOT = HOOKS.parents[1]
for path in (ROOT, HOOKS):  # this checkout's code, whatever else is installed
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import docs_config  # noqa: E402
import docs_tables  # noqa: E402
import study_tables  # noqa: E402

TABLES = {**docs_tables.TABLES, **study_tables.TABLES}

TABLE = re.compile(r"^<!-- table: (\w+) -->$", re.MULTILINE)
# any value or ratio marker, well-formed or not, so that a malformed one fails the build
# rather than stay in the page as a comment the reader never sees
NUMBER = re.compile(r"<!-- (value|ratio):(.*?)-->")
ARGUMENTS = {"value": ("PATH", "KEY", "FORMAT"), "ratio": ("PATH", "KEY_A", "KEY_B", "FORMAT")}
CONFIG = "<!-- config-reference -->"
# site path -> file in the repository, for files that live outside docs/
EXTERNAL_FILES = {
    f"results/reproduce_poet/{name}": f"experiments/results/reproduce_poet/{name}"
    for name in ("scores.png", "climb.png", "annecs.png")
}


def number(path: str, key: str) -> float:
    """The number at dotted `key` in the results file `path`; anything else there is an error."""
    value = docs_tables.lookup(docs_tables.load(path), key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{key} in {path} is {value!r}, not a number")
    return value


def marker_text(marker: re.Match) -> str:
    """What a value or ratio marker shows; a missing file or key is an error naming the marker."""
    kind, args = marker.group(1), marker.group(2).split()
    try:
        if len(args) != len(ARGUMENTS[kind]):
            raise ValueError(f"takes {' '.join(ARGUMENTS[kind])}")
        path, *keys, fmt = args
        values = [number(path, key) for key in keys]
        return format(values[0] / values[1] if kind == "ratio" else values[0], fmt)
    except (OSError, LookupError, TypeError, ValueError, ZeroDivisionError) as err:
        raise ValueError(f"{marker.group(0)}: {type(err).__name__}: {err}") from err


def fill_numbers(markdown: str) -> str:
    """The page with its value and ratio markers replaced by the numbers they name."""
    return NUMBER.sub(marker_text, markdown)


def fill(markdown: str) -> str:
    """The page with its markers replaced; an unknown table name, results file or key is an error."""

    def table(match: re.Match) -> str:
        name = match.group(1)
        if name not in TABLES:
            raise KeyError(f"no generated table {name!r}; known: {', '.join(TABLES)}")
        return TABLES[name]().markdown()

    markdown = fill_numbers(TABLE.sub(table, markdown))
    if CONFIG in markdown:
        markdown = markdown.replace(CONFIG, docs_config.markdown())
    return markdown


def on_page_markdown(markdown, page, config, files):
    return fill(markdown)


def on_files(files, config):
    from mkdocs.structure.files import File

    for site_path, source in EXTERNAL_FILES.items():
        files.append(File.generated(config, site_path, abs_src_path=str(ROOT / source)))
    return files
