"""POET and Enhanced POET: open-ended co-evolution of environments and agents.

    import poet
    result = poet.run("experiments/quickstart.yaml", out="runs/demo")
    run = poet.analysis.load_run(result.run_dir)
"""
__version__ = "0.1.0"

from poet import analysis  # noqa: E402
from poet.config import ConfigError, RunConfig, load_config  # noqa: E402
from poet.runner import RunInterrupted, RunResult, resume, run  # noqa: E402

__all__ = ["ConfigError", "RunConfig", "RunInterrupted", "RunResult", "analysis", "load_config", "resume", "run",
           "__version__"]
