"""The machinery that runs a run: the runner (build, run, resume), the orchestrator (the
iteration loop), checkpoints, live sinks and the run directory's lock."""
