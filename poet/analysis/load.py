"""Reading a run directory: `load_run(dir)` gives the record tables as pandas DataFrames."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from envs import EnvParams
from poet.config import NotARunDirectory
from poet.records import read_rows

if TYPE_CHECKING:
    from poet.analysis.agents import Agent

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
    info: dict[str, Any] = dataclasses.field(default_factory=dict)  # run.json: versions, policy, report_traits

    def _per_iteration(self, hits: pd.Series, name: str) -> pd.Series:
        last = int(self.iterations["iteration"].max()) if len(self.iterations) else -1
        index = pd.RangeIndex(0, last + 1, name="iteration")
        hits = hits.to_numpy()
        return pd.Series([int((hits <= i).sum()) for i in index], index=index, name=name)

    @property
    def annecs(self) -> pd.Series:
        """ANNECS after each iteration, as this project reads the Enhanced POET paper's
        definition: envs created by reproduction (so they passed the MC) and solved by then."""
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

    @property
    def phylogeny(self) -> pd.DataFrame:
        """Every env the run made, one row each in creation order: env_id, parent_env_id (None
        for a root), pair_id (the pair made for it), created_iteration, solved_iteration,
        retired_iteration, difficulty (the paper's class, <NA> where the family has none),
        depth (0 at a root), root_env_id, and params (the env's parameter values, a dict).
        The parent links form a forest rooted at the run's initial envs."""
        envs = self.envs
        parent = dict(zip(envs["env_id"], envs["parent_env_id"]))
        depth, root = [], []
        for env_id in envs["env_id"]:
            steps, node = 0, env_id
            while isinstance(parent.get(node), str) and parent[node] in parent:
                node, steps = parent[node], steps + 1
            depth.append(steps)
            root.append(node)
        out = envs[
            [
                "env_id",
                "parent_env_id",
                "pair_id",
                "created_iteration",
                "solved_iteration",
                "retired_iteration",
                "difficulty",
            ]
        ].copy()
        out["depth"] = pd.Series(depth, index=envs.index, dtype="int64")
        out["root_env_id"] = root
        out["params"] = [json.loads(p)["values"] if isinstance(p, str) else {} for p in envs.get("params_json", [])]
        return out.reset_index(drop=True)

    @property
    def transfer_edges(self) -> pd.DataFrame:
        """Every transfer attempt as an edge between two pairs and their envs: iteration,
        source_pair_id, source_env_id, target_pair_id, target_env_id, kind (direct or
        fine_tune), score_before (the target's incumbent agent on the target env),
        score_after (the candidate's score there) and accepted."""
        columns = [
            "iteration",
            "source_pair_id",
            "source_env_id",
            "target_pair_id",
            "target_env_id",
            "kind",
            "score_before",
            "score_after",
            "accepted",
        ]
        t = self.transfers
        if not len(t):
            return pd.DataFrame(columns=columns)
        env_of = dict(zip(self.envs["pair_id"], self.envs["env_id"]))
        out = pd.DataFrame(
            {
                "iteration": t["iteration"].astype("int64"),
                "source_pair_id": t["source_pair_id"],
                "source_env_id": t["source_pair_id"].map(env_of),
                "target_pair_id": t["target_pair_id"],
                "target_env_id": t["target_pair_id"].map(env_of),
                "kind": t["kind"],
                "score_before": t["incumbent_score"].astype(float),
                "score_after": t["score"].astype(float),
                "accepted": t["accepted"].astype(bool),
            }
        )
        return out[columns].reset_index(drop=True)

    def agents(self, iteration: int | None = None) -> list[Agent]:
        """Every pair's agent in the newest checkpoint at or before `iteration` (None: newest)."""
        from poet.analysis import agents

        return agents.kept_agents(self, iteration)

    def agent(self, pair: str | None = None, env: str | None = None, iteration: int | None = None) -> Agent:
        """The agent of pair `pair` (or of the pair made for env `env`), from the newest
        checkpoint at or before `iteration`."""
        from poet.analysis import agents

        return agents.agent(self, pair, env, iteration)

    def score(
        self,
        agents: Sequence[Agent],
        envs: Sequence[str | EnvParams],
        backend: str = "inprocess",
        workers: int | None = None,
    ) -> pd.DataFrame:
        """Each agent on each env (env ids, pair ids or EnvParams such as a family's samples)
        as the run scores: a row per pair with pair_id, agent_iteration, agent_id, env_id, score.
        `backend="ray"` runs the wave on a local Ray pool of `workers`."""
        from poet.analysis import agents as scoring

        return scoring.score(self, agents, envs, backend, workers)

    def cross_eval(
        self,
        agents: Sequence[Agent] | None = None,
        envs: Sequence[str | EnvParams] | None = None,
        backend: str = "inprocess",
        workers: int | None = None,
        max_env_steps: int | None = None,
        cache: bool = True,
    ) -> pd.DataFrame:
        """Agents x envs score matrix (`poet.analysis.agents.cross_eval`): by default every
        agent of the newest checkpoint on every env of the run; kept in the run directory."""
        from poet.analysis import agents as scoring

        limit = scoring.MAX_ENV_STEPS if max_env_steps is None else max_env_steps
        return scoring.cross_eval(self, agents, envs, backend, workers, limit, cache)

    def robustness(
        self,
        levels: int | Sequence[EnvParams],
        alphas: Sequence[float] | None = None,
        agents: Sequence[Agent] | None = None,
        n: int = 100,
        seed: int = 0,
        backend: str = "inprocess",
        workers: int | None = None,
    ) -> pd.DataFrame:
        """Robustness (CVaR) curves of the agents on `levels`: a paper class (0-3), whose `n`
        levels are drawn with `seed` the same for every run, or level params
        (`poet.analysis.agents.robustness`)."""
        from poet.analysis import agents as scoring

        chosen = scoring.ALPHAS if alphas is None else alphas
        return scoring.robustness(self, levels, chosen, agents, n, seed, backend, workers)

    def score_levels(
        self,
        name: str,
        agents: Sequence[Agent] | None = None,
        episodes: int | None = None,
        pick: str = "best",
        backend: str = "inprocess",
        workers: int | None = None,
    ) -> pd.DataFrame:
        """The run's final agents (or `agents`) on the family's level set `name`, such as dcd's
        test envs: mean return and solved rate per level with 95% intervals, the best agent per
        level or every one (`poet.analysis.level_sets.score_levels`)."""
        from poet.analysis import level_sets

        return level_sets.score_levels(self, name, agents, episodes, pick, backend, workers)

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
        raise NotARunDirectory(f"{str(path)!r} is not a run directory (no records/ folder)")
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
    info_path = path / "run.json"
    try:
        info = json.loads(info_path.read_text()) if info_path.exists() else {}
    except ValueError:
        info = {}  # an unreadable run.json hides what the curriculum declared, nothing else
    return Run(path, config, iterations, envs, transfers, events, phases, _frame(path, "heldout"), info)


def _fill_env_lifecycle(envs: pd.DataFrame, events: pd.DataFrame) -> None:
    """retired_iteration and solved_iteration of each env, from the events table."""
    for kind, col in (("retired", "retired_iteration"), ("solved", "solved_iteration")):
        hits = (
            events[events["kind"] == kind].groupby("env_id")["iteration"].min()
            if len(events)
            else pd.Series(dtype=float)
        )
        envs[col] = envs["env_id"].map(hits).astype("Int64") if len(envs) else pd.Series(dtype="Int64")
