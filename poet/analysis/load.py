"""Reading a run directory: `load_run(dir)` gives the record tables as pandas DataFrames."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from poet.records import read_rows

COLUMNS = {
    "iterations": ["iteration", "pair_id", "env_id", "score"],
    "envs": [
        "env_id",
        "family",
        "pair_id",
        "parent_env_id",
        "created_iteration",
        "retired_iteration",
        "solved_iteration",
        "difficulty",
    ],
    "transfers": ["iteration", "source_pair_id", "target_pair_id", "kind", "score", "incumbent_score", "accepted"],
    "events": ["iteration", "kind", "pair_id", "env_id", "detail"],
    "phases": ["iteration", "phase", "seconds", "env_steps"],
    "heldout": ["iteration", "pair_id", "level", "env_id", "score"],
}


@dataclass
class Run:
    """A run directory's tables and config."""

    path: Path
    config: dict[str, Any]
    iterations: pd.DataFrame
    envs: pd.DataFrame
    transfers: pd.DataFrame
    events: pd.DataFrame
    phases: pd.DataFrame  # wall time and env steps of every phase (not part of the results: timings vary)
    # the agents' scores on the family's held-out levels (`evaluation.test_every`)
    heldout: pd.DataFrame = dataclasses.field(default_factory=lambda: pd.DataFrame(columns=COLUMNS["heldout"]))

    def _per_iteration(self, hits: pd.Series, name: str) -> pd.Series:
        last = int(self.iterations["iteration"].max()) if len(self.iterations) else -1
        index = pd.RangeIndex(0, last + 1, name="iteration")
        hits = hits.to_numpy()
        return pd.Series([int((hits <= i).sum()) for i in index], index=index, name=name)

    @property
    def annecs(self) -> pd.Series:
        """ANNECS as the Enhanced POET paper defines it, after each iteration: envs created by
        reproduction (so they passed the MC) and solved by then."""
        solved = self.envs.loc[self.envs["parent_env_id"].notna(), "solved_iteration"].dropna()
        return self._per_iteration(solved, "annecs")

    @property
    def annecs_reference(self) -> pd.Series:
        """ANNECS as the reference code counts it (`poet_algo.py` `adjust_envs_niches`), after each
        iteration: admitted envs on which the best archived agent passed the MC (Enhanced POET only;
        it stays 0 until the archive holds an agent)."""
        admitted = self.events[self.events["kind"] == "admitted"] if len(self.events) else self.events
        counted = [
            int(it)
            for it, d in zip(admitted["iteration"], admitted["detail"])
            if json.loads(d or "{}").get("annecs_reference") is True
        ]
        return self._per_iteration(pd.Series(counted, dtype="int64"), "annecs_reference")

    def throughput(self) -> pd.DataFrame:
        """Per phase (train, reproduce, transfer, and all): wall seconds, env steps and steps per second."""
        ph = self.phases
        rows = []
        for name, part in [*ph.groupby("phase", sort=False), ("all", ph)]:
            seconds, steps = float(part["seconds"].sum()), int(part["env_steps"].sum())
            rows.append(
                {
                    "phase": name,
                    "seconds": seconds,
                    "env_steps": steps,
                    "steps_per_second": steps / seconds if seconds > 0 else float("nan"),
                }
            )
        return pd.DataFrame(rows, columns=["phase", "seconds", "env_steps", "steps_per_second"]).set_index("phase")

    def children(self) -> pd.DataFrame:
        """Every proposed child env with its MC score, novelty and whether it was admitted."""
        rows = self.events[self.events["kind"] == "child"]
        details = [json.loads(d) for d in rows["detail"]]
        out = (
            rows[["iteration", "pair_id", "env_id"]]
            .rename(columns={"pair_id": "parent_pair_id"})
            .reset_index(drop=True)
        )
        for key in ("mc_score", "passed_mc", "novelty", "admitted_as"):
            out[key] = [d.get(key) for d in details]
        return out


def _frame(run_dir: Path, table: str) -> pd.DataFrame:
    rows = read_rows(run_dir, table)
    df = pd.DataFrame(rows)
    for col in COLUMNS[table]:
        if col not in df.columns:
            df[col] = pd.Series(dtype=object)
    first = [c for c in COLUMNS[table] if c in df.columns]
    return df[first + [c for c in df.columns if c not in first]]


def load_run(run_dir: str | Path) -> Run:
    """Load a run directory written by `poet run`."""
    path = Path(run_dir)
    if not (path / "records").is_dir():
        raise FileNotFoundError(f"{str(path)!r} is not a run directory (no records/ folder)")
    config_path = path / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.exists() else {}
    iterations = _frame(path, "iterations")
    envs = _frame(path, "envs")
    transfers = _frame(path, "transfers")
    events = _frame(path, "events")
    phases = _frame(path, "phases")
    _fill_env_lifecycle(envs, events)
    # the POET paper's class (0 easy .. 3 extremely challenging); <NA> where the family has none
    envs["difficulty"] = envs["difficulty"].astype("Int64")
    if len(transfers):
        transfers["accepted"] = transfers["accepted"].astype(bool)
    return Run(path, config, iterations, envs, transfers, events, phases, _frame(path, "heldout"))


def _fill_env_lifecycle(envs: pd.DataFrame, events: pd.DataFrame) -> None:
    """retired_iteration and solved_iteration of each env, from the events table."""
    for kind, col in (("retired", "retired_iteration"), ("solved", "solved_iteration")):
        hits = (
            events[events["kind"] == kind].groupby("env_id")["iteration"].min()
            if len(events)
            else pd.Series(dtype=float)
        )
        envs[col] = envs["env_id"].map(hits).astype("Int64") if len(envs) else pd.Series(dtype="Int64")
