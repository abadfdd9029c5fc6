"""Reading a run: `load_run(dir)` and the run's tables and agents, the report and comparison
pages, the population figures, rendered episodes and the course images they draw. Nothing
here imports a run's code.

Everything a notebook needs is a name of this package (`__all__`); the heavier ones load on
first use.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from poet.analysis.load import Run, load_run

# public name -> the module that defines it (imported when first asked for)
LAZY = {
    "Agent": "poet.analysis.agents",
    "class_levels": "poet.analysis.agents",
    "phylogeny_figure": "poet.analysis.figures",
    "cross_eval_figure": "poet.analysis.figures",
    "robustness_figure": "poet.analysis.figures",
    "param_heatmap_figure": "poet.analysis.figures",
    "FIGURES": "poet.analysis.report",
    "caption": "poet.analysis.report",
    "figure_png": "poet.analysis.report",
    "summary": "poet.analysis.report",
    "write_report": "poet.analysis.report",
    "write_comparison": "poet.analysis.compare",
    "render_gif": "poet.analysis.render",
}


def __getattr__(name: str) -> Any:
    if name in LAZY:
        return getattr(import_module(LAZY[name]), name)
    raise AttributeError(f"module 'poet.analysis' has no attribute {name!r}")


__all__ = ["Run", "load_run", *LAZY]
