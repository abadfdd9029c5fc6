"""POET and Enhanced POET: open-ended co-evolution of environments and agents.

import poet
result = poet.run("experiments/quickstart.yaml", out="runs/demo")
run = poet.analysis.load_run(result.run_dir)
"""

from typing import Any

from poet.config import ConfigError, RunConfig
from poet.errors import RunInterrupted
from poet.version import __version__

_RUNNER = ("RunResult", "resume", "run")


def __getattr__(name: str) -> Any:
    # Loaded on first use: analysis pulls in pandas, which a run (and every Ray worker) never
    # needs; the runner pulls in torch and the evaluators, which `poet report` never needs.
    if name == "analysis":
        import poet.analysis

        return poet.analysis
    if name in _RUNNER:
        from poet.runtime import runner

        return getattr(runner, name)
    if name == "load_config":  # with each curriculum's defaults, which need the curricula
        from poet.parts import load_config

        return load_config
    raise AttributeError(f"module 'poet' has no attribute {name!r}")


__all__ = [
    "ConfigError",
    "RunConfig",
    "RunInterrupted",
    "RunResult",
    "analysis",
    "load_config",
    "resume",
    "run",
    "__version__",
]
