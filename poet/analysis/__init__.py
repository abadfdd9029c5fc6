"""Reading a run: `load_run(dir)` and the run's tables, the report and comparison pages,
rendered episodes and the course images they draw. Nothing here imports a run's code."""

from poet.analysis.load import Run, load_run

__all__ = ["Run", "load_run"]
