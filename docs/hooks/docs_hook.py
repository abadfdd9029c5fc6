"""mkdocs hook: fills the generated parts of the pages and adds the study's figures.

* `<!-- table: NAME -->` on a line of its own becomes the table `docs_tables.TABLES[NAME]`
  builds from its results file;
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

TABLE = re.compile(r"^<!-- table: (\w+) -->$", re.MULTILINE)
CONFIG = "<!-- config-reference -->"
# site path -> file in the repository, for files that live outside docs/
EXTERNAL_FILES = {
    f"results/reproduce_poet/{name}": f"experiments/results/reproduce_poet/{name}"
    for name in ("scores.png", "climb.png", "annecs.png")
}


def fill(markdown: str) -> str:
    """The page with its markers replaced; an unknown table name is an error."""

    def table(match: re.Match) -> str:
        name = match.group(1)
        if name not in docs_tables.TABLES:
            raise KeyError(f"no generated table {name!r}; known: {', '.join(docs_tables.TABLES)}")
        return docs_tables.TABLES[name]().markdown()

    markdown = TABLE.sub(table, markdown)
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
