"""The documentation's tables of measurements and results, built from the JSON files the
benchmark and study scripts write (`benchmarks/results/*.json`, `experiments/results/**/*.json`).

A page asks for a table with a line `<!-- table: NAME -->` (docs_hook.py puts the table
there when the site is built), so no number in these tables is ever typed by hand. Every
numeric cell remembers the JSON file and key it came from: tests/test_docs.py reads each one
back from the file and compares.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # this checkout's families, also when run as a script
    sys.path.insert(0, str(ROOT))

from envs.terrain import describe  # noqa: E402


@dataclass(frozen=True)
class Cell:
    """One table cell: its text and, for a number, where it came from.

    `text` is `prefix + format(value * scale, fmt) + suffix`; `source` is a JSON file relative to
    the repository root and `key` the dotted path of the value in it (list items by index).
    """

    text: str
    source: str | None = None
    key: str | None = None
    scale: float = 1.0
    fmt: str = ""


@dataclass
class Table:
    """A markdown table whose numeric cells know their source."""

    headers: list[str]
    rows: list[list[Cell]] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    note: str = ""

    def markdown(self) -> str:
        lines = ["| " + " | ".join(self.headers) + " |", "|" + "---|" * len(self.headers)]
        lines += ["| " + " | ".join(c.text for c in row) + " |" for row in self.rows]
        where = ", ".join(f"`{s}`" for s in self.sources)
        lines += ["", f"<small>Generated from {where}{'; ' + self.note if self.note else ''}.</small>"]
        return "\n".join(lines) + "\n"


@cache
def load(source: str) -> Any:
    """A results file, parsed (relative to the repository root)."""
    return json.loads((ROOT / source).read_text())


def lookup(data: Any, key: str) -> Any:
    """The value at dotted `key` (a number indexes a list; a name with dots in it, such as
    "stumps 2.4", is found by joining parts until one names a key)."""
    parts = key.split(".")
    while parts:
        part = parts.pop(0)
        if isinstance(data, list):
            data = data[int(part)]
            continue
        while part not in data and parts:
            part += "." + parts.pop(0)
        data = data[part]
    return data


class Source:
    """Cells read from one results file."""

    def __init__(self, path: str):
        self.path = path
        self.data = load(path)

    def get(self, key: str) -> Any:
        return lookup(self.data, key)

    def num(self, key: str, fmt: str = ",.0f", scale: float = 1.0, suffix: str = "", prefix: str = "") -> Cell:
        value = self.get(key)
        shown = value * scale if scale != 1 else value
        return Cell(f"{prefix}{shown:{fmt}}{suffix}", self.path, key, scale, fmt)


def text(value: str) -> Cell:
    return Cell(value)


# ---------------------------------------------------------------- benchmarks


def eval_pool() -> Table:
    """The pool against plain code, a naive Ray loop and EvoTorch, per env (env steps per second)."""
    src = Source("benchmarks/results/eval_pool.json")
    table = Table(
        [
            "env",
            "engine alone, per core",
            "plain-code rollouts, per core",
            "raw limit (2 plain processes)",
            "raw, waiting for each wave",
            "plain code on Ray, nothing sent (Ray's floor)",
            "plain code on Ray, weights sent",
            "pool (2 workers)",
            "naive (task per episode)",
            "EvoTorch (GymNE + PGPE)",
        ],
        sources=[src.path],
    )
    for env, label in EVAL_POOL_ENVS.items():
        k = f"envs.{env}."
        table.rows.append(
            [
                text(label),
                src.num(k + "engine_steps_per_s_per_core"),
                src.num(k + "rollout_steps_per_s_per_core"),
                src.num(k + "raw_steps_per_s"),
                src.num(k + "raw_synced_steps_per_s"),
                src.num(k + "raw_ray_steps_per_s"),
                src.num(k + "raw_ray_weights_steps_per_s"),
                src.num(k + "pool_steps_per_s"),
                src.num(k + "naive_steps_per_s"),
                src.num(k + "evotorch_steps_per_s") if "evotorch_steps_per_s" in src.get(k[:-1]) else text(""),
            ]
        )
    return table


def eval_pool_ratios() -> Table:
    """The same run as ratios, and the workers' memory with 10 and 1000 policies in a wave."""
    src = Source("benchmarks/results/eval_pool.json")
    table = Table(
        [
            "env",
            "pool / raw limit",
            "lowest, highest repetition",
            "Ray's floor / raw limit",
            "plain code on Ray, weights sent / raw limit",
            "pool / plain code on Ray, weights sent",
            "pool / naive",
            "pool / EvoTorch",
            "worker RSS, 10 policies (MB)",
            "1000 policies (MB)",
        ],
        sources=[src.path],
    )
    for env, label in EVAL_POOL_ENVS.items():
        k = f"envs.{env}."
        per_repeat = src.get(k + "efficiency_per_repeat")
        lo, hi = per_repeat.index(min(per_repeat)), per_repeat.index(max(per_repeat))
        table.rows.append(
            [
                text(label),
                src.num(k + "efficiency", ".2f"),
                Cell(
                    f"{per_repeat[lo]:.2f} to {per_repeat[hi]:.2f}",
                    src.path,
                    f"{k}efficiency_per_repeat.{lo}",
                    fmt=".2f",
                ),
                src.num(k + "raw_ray_vs_raw", ".2f"),
                src.num(k + "raw_ray_weights_vs_raw", ".2f"),
                src.num(k + "pool_vs_raw_ray_weights", ".2f"),
                src.num(k + "speedup_vs_naive", ".3g"),
                src.num(k + "pool_vs_evotorch", ".2f") if "pool_vs_evotorch" in src.get(k[:-1]) else text(""),
                src.num(k + "worker_rss_mb_10", ".0f"),
                src.num(k + "worker_rss_mb_1000", ".0f"),
            ]
        )
    return table


def eval_pool_one_worker() -> Table:
    """Terrain with one worker: the second core left to the driver and Ray's own processes."""
    src = Source("benchmarks/results/eval_pool_one_worker.json")
    k = "envs.terrain."
    rows = [
        ("raw limit (1 plain process)", "raw_steps_per_s", None),
        ("plain code on Ray, nothing sent (Ray's floor)", "raw_ray_steps_per_s", "raw_ray_vs_raw"),
        ("plain code on Ray, weights sent", "raw_ray_weights_steps_per_s", "raw_ray_weights_vs_raw"),
        ("pool (1 worker)", "pool_steps_per_s", "efficiency"),
    ]
    return Table(
        ["way", "steps/s", "share of the raw limit"],
        [
            [text(label), src.num(k + key), src.num(k + share, ".2f") if share else text("")]
            for label, key, share in rows
        ],
        sources=[src.path],
    )


EVAL_POOL_ENVS = {
    "terrain": "terrain (compiled core), fixed courses",
    "terrain_fresh": "terrain, a new course every episode",
    "bipedal": "BipedalWalker-v3",
}


def eval_pool_ways() -> Table:
    """The terrain limit against the earlier ways of stepping the same episodes."""
    src = Source("benchmarks/results/eval_pool.json")
    k = "envs.terrain."
    return Table(
        ["way", "steps/s", "raw limit over it", "pool over it"],
        [
            [
                text("raw limit: each row to its end in one compiled call"),
                src.num(k + "raw_steps_per_s"),
                text(""),
                text(""),
            ],
            [
                text("the same kernels in lock-step"),
                src.num(k + "raw_lockstep_steps_per_s"),
                src.num(k + "raw_vs_raw_lockstep", ".2f"),
                text(""),
            ],
            [
                text("plain-numpy core, batched numpy MLP"),
                src.num(k + "raw_numpy_steps_per_s"),
                src.num(k + "raw_vs_raw_numpy", ".2f"),
                src.num(k + "pool_vs_raw_numpy", ".2f"),
            ],
        ],
        sources=[src.path],
    )


def eval_pool_bipedal_family() -> Table:
    """The `bipedal` family's row (measured on its own, before the pool lost its direct connections)."""
    src = Source("benchmarks/results/eval_pool_bipedal_family.json")
    k = "envs.bipedal_family."
    return Table(
        ["env", "raw limit", "pool (then)", "pool over Ray tasks", "its share of the limit", "naive", "pool / naive"],
        [
            [
                text("`bipedal` (16 policies x 4 courses)"),
                src.num(k + "raw_steps_per_s"),
                src.num(k + "pool_steps_per_s"),
                src.num(k + "pool_ray_transport_steps_per_s"),
                src.num(k + "pool_ray_transport_share_of_raw", ".2f"),
                src.num(k + "naive_steps_per_s"),
                src.num(k + "speedup_vs_naive", ".2f"),
            ]
        ],
        sources=[src.path],
    )


def raw_widths() -> Table:
    """Plain code's steps/s with 1, 4 and 8 gymnasium envs stepped together, one process."""
    src = Source("benchmarks/results/raw_widths.json")
    widths = list(src.get("raw_widths.bipedal.steps_per_s_by_width"))
    table = Table(["env", *(f"{w} at a time" for w in widths)], sources=[src.path])
    for env, label in (("bipedal", "BipedalWalker-v3"), ("bipedal_family", "`bipedal` family")):
        table.rows.append([text(label), *(src.num(f"raw_widths.{env}.steps_per_s_by_width.{w}") for w in widths)])
    return table


def checkpoint_capture() -> Table:
    """The score cache per agent in columns against the flat layout before it, on a real run's state."""
    src = Source("benchmarks/results/checkpoint_capture.json")
    parts = (
        ("boundary", "after every iteration: forget dead agents, copy for a checkpoint"),
        ("write", "the cache's part of writing a checkpoint"),
        ("read", "the cache's part of reading one"),
        ("lookup", "PATA-EC's lookup of its cached scores"),
    )
    table = Table(["work", "per agent, columns (s)", "flat, JSON triples (s)", "flat over this"], sources=[src.path])
    for key, label in parts:
        table.rows.append(
            [
                text(label),
                src.num(f"seconds.{key}", ".3f"),
                src.num(f"seconds.flat_{key}", ".3f"),
                src.num(f"flat_over_this.{key}", ".1f", suffix="x"),
            ]
        )
    table.note = (
        f"{src.get('cached_scores'):,} cached scores of {src.get('active')} active and "
        f"{src.get('archived')} archived agents at iteration {src.get('iteration'):,}; "
        f"{src.get('lookup_jobs'):,} lookups; best of {src.get('repeats')}"
    )
    return table


def pool_waves() -> Table:
    """Where a terrain wave's time goes, and finer chunks against the default."""
    src = Source("benchmarks/results/pool_waves.json")
    c = "chunk_speeds."
    rows = [
        ("waves timed", src.num(c + "waves")),
        ("a wave, median (ms)", src.num(c + "wave_ms_median", ".1f")),
        ("its slower chunk, median (ms)", src.num(c + "slower_chunk_ms_median", ".1f")),
        ("dispatch and results, median (ms)", src.num(c + "rest_of_wave_ms_median", ".1f")),
        ("slower over faster worker per env step, median", src.num(c + "slower_over_faster_per_step_median", ".2f")),
        ("... 90th percentile", src.num(c + "slower_over_faster_per_step_p90", ".2f")),
        ("lag-1 correlation of its logarithm", src.num(c + "log_ratio_lag1_correlation", ".2f")),
        ("2 chunks per worker, rate over the default", src.num("chunks_per_worker.over_default.2_per_worker", ".3f")),
        ("4 chunks per worker, rate over the default", src.num("chunks_per_worker.over_default.4_per_worker", ".3f")),
    ]
    t = "wave_timeline.ms_median."
    rows += [
        ("time line: waves timed", src.num("wave_timeline.waves")),
        ("... a wave, median (ms)", src.num(t + "wave", ".2f")),
        ("... the driver, until the last-ending chunk's call is sent (ms)", src.num(t + "driver_before_call", ".2f")),
        ("... Ray, delivering that call to its worker (ms)", src.num(t + "ray_to_worker", ".2f")),
        ("... the call in the worker (ms)", src.num(t + "call", ".2f")),
        (
            "... of which beyond its rollouts: unpacking, packing results (ms)",
            src.num(t + "call_beyond_rollouts", ".2f"),
        ),
        ("... Ray, returning its answer to the driver (ms)", src.num(t + "ray_back", ".2f")),
        ("... the driver, after that answer (ms)", src.num(t + "driver_after", ".2f")),
        (
            "the same waves' calls alone, chunks packed beforehand: rate over the pool's",
            src.num("driver_work.calls_alone_over_evaluate", ".3f"),
        ),
        (
            "the same waves with the driver running one worker's share: rate over the pool's",
            src.num("driver_work.driver_share_over_evaluate", ".3f"),
        ),
    ]
    return Table(["measure", "value"], [[text(a), b] for a, b in rows], sources=[src.path])


def small_waves() -> Table:
    """Small waves: every wave on the workers, the pool's own rule, one process."""
    src = Source("benchmarks/results/small_waves.json")
    rows = []
    for i in range(len(src.get("rows"))):
        k = f"rows.{i}."
        rows.append(
            [
                src.num(k + "requests", "d"),
                src.num(k + "env_steps", ","),
                src.num(k + "ms_median.workers", ".2f"),
                src.num(k + "ms_median.pool", ".2f"),
                src.num(k + "ms_median.one_process", ".2f"),
            ]
        )
    headers = ["requests", "env steps", "on the workers (ms)", "the pool's rule (ms)", "one process (ms)"]
    return Table(headers, rows, sources=[src.path], note="median ms per wave")


def compiled_graph() -> Table:
    """Ray Compiled Graphs and a driver share against actor tasks on the pool's terrain chunks."""
    src = Source("benchmarks/results/compiled_graph.json")
    m = "wave_ms_median."
    return Table(
        ["way", "ms per wave (median)"],
        [
            [text("actor tasks, the same argument"), src.num(m + "tasks", ".2f")],
            [text("compiled graph"), src.num(m + "compiled", ".2f")],
            [text("the driver runs one chunk, actors the others"), src.num(m + "driver", ".2f")],
            [text("the pool as it runs"), src.num(m + "pool", ".2f")],
            [text("compiled over tasks"), src.num("compiled_over_tasks", ".2f", suffix="x")],
            [text("driver share over tasks"), src.num("driver_over_tasks", ".2f", suffix="x")],
        ],
        sources=[src.path],
    )


def chunk_cost() -> Table:
    """The framework's rollout code against plain code on the same chunk, one process."""
    src = Source("benchmarks/results/chunk_cost.json")
    return Table(
        ["code", "ms per chunk (median)"],
        [
            [text("framework (a worker's `run`)"), src.num("chunk_ms_median.framework", ".2f")],
            [text("plain code"), src.num("chunk_ms_median.plain", ".2f")],
            [text("framework over plain"), src.num("framework_over_plain", ".2f", suffix="x")],
        ],
        sources=[src.path],
    )


def quickstart() -> Table:
    """The quickstart with ES and with PPO: what it achieved and what it cost."""
    es, ppo = Source("benchmarks/results/quickstart.json"), Source("benchmarks/results/quickstart_ppo.json")
    rows = [
        ("iterations", "iterations", "d"),
        ("wall seconds", "wall_seconds", ".1f"),
        ("flat course solved at iteration", "flat_course_solved_at_iteration", "d"),
        ("envs admitted", "envs_admitted", "d"),
        ("transfers accepted", "transfers_accepted", "d"),
        ("transfer attempts", "transfer_attempts", "d"),
        ("ANNECS", "annecs", "d"),
        ("largest roughness", "max_roughness", ".1f"),
        ("largest pit gap (upper end)", "max_pit_gap_hi", ".1f"),
        ("largest stump height (upper end)", "max_stump_height_hi", ".1f"),
    ]
    table = Table(["measure", "ES (the default)", "PPO (`--set trainer.name=ppo`)"], sources=[es.path, ppo.path])
    for label, key, fmt in rows:
        table.rows.append([text(label), es.num(key, fmt), ppo.num(key, fmt)])
    return table


def quickstart_waves() -> Table:
    """The quickstart's waves replayed with plain code: the pool's share of the limit."""
    src = Source("benchmarks/results/quickstart.json")
    rows = [
        ("env steps of the run (its phase records)", src.num("env_steps")),
        ("seconds in its phases", src.num("phase_seconds", ".1f")),
        ("the run's env steps/s", src.num("env_steps_per_s")),
        ("waves", src.num("waves")),
        ("episodes replayed", src.num("episodes_replayed")),
        ("the pool, seconds inside its waves", src.num("pool_seconds_in_waves", ".2f")),
        ("plain code, seconds for the same waves", src.num("raw_seconds_same_waves", ".2f")),
        ("plain code, steps/s", src.num("raw_same_waves_steps_per_s")),
        ("the pool's share of plain code", src.num("pool_share_of_raw_same_waves", ".2f")),
        ("plain code on Ray (Ray's floor), seconds for the same waves", src.num("raw_ray_seconds_same_waves", ".2f")),
        ("Ray's floor's share of plain code", src.num("raw_ray_share_of_raw_same_waves", ".2f")),
        ("the pool's share of Ray's floor", src.num("pool_share_of_raw_ray_same_waves", ".2f")),
        ("the whole run's share (driver work included)", src.num("run_share_of_raw_same_waves", ".2f")),
        ("plain code on the earlier plain-numpy core, seconds", src.num("raw_numpy_seconds_same_waves", ".2f")),
        ("... its steps/s", src.num("raw_numpy_same_waves_steps_per_s")),
    ]
    return Table(["measure", "value"], [[text(a), b] for a, b in rows], sources=[src.path])


def backends() -> Table:
    """Runs on the Ray pool and in-process, alternating: wall time, phase time, steps/s."""
    cases = [
        ("the quickstart", "benchmarks/results/backends_quickstart.json"),
        ("`reproduce_poet.yaml`, 200 iterations, capacity 20", "benchmarks/results/backends_cap20_200.json"),
        ("the same, 1,000 iterations (one round)", "benchmarks/results/backends_cap20_1000.json"),
    ]
    table = Table(
        ["run", "backend", "wall seconds", "seconds in its phases", "env steps/s in them"],
        sources=[path for _, path in cases],
        note="medians; every run of a file gave the same records",
    )
    ways = (("ray", "Ray pool"), ("ray_every_wave", "Ray pool, every wave on the workers"), ("inprocess", "in-process"))
    for name, path in cases:
        src = Source(path)
        # files written before `ray.local_wave_steps` have no every-wave runs
        for backend, label in [(b, label) for b, label in ways if b in src.get("median")]:
            k = f"median.{backend}."
            table.rows.append(
                [
                    text(name if backend == "ray" else ""),
                    text(label),
                    src.num(k + "wall_seconds", ".1f"),
                    src.num(k + "phase_seconds", ".1f"),
                    src.num(k + "env_steps_per_s", ",.0f"),
                ]
            )
    return table


def quickstart_vs_numpy_core() -> Table:
    """The quickstart before and after the compiled terrain core, alternating on one machine."""
    src = Source("benchmarks/results/quickstart_vs_numpy_core.json")
    return Table(
        ["commit", "env steps/s (median)", "wall seconds (median)"],
        [
            [
                text(f"`{src.get('base')[:7]}` (plain-numpy core)"),
                src.num("median_env_steps_per_s.base"),
                src.num("median_wall_seconds.base", ".1f"),
            ],
            [
                text(f"`{src.get('this')[:7]}` (compiled core)"),
                src.num("median_env_steps_per_s.this"),
                src.num("median_wall_seconds.this", ".1f"),
            ],
            [text("speed-up"), src.num("speedup_env_steps_per_s", ".2f", suffix="x"), text("")],
        ],
        sources=[src.path],
    )


def bipedal_step() -> Table:
    """The `bipedal` family's step against gymnasium's own walker."""
    src = Source("benchmarks/results/bipedal_step.json")
    table = Table(["env", "µs per step (median)", "over BipedalWalker-v3"], sources=[src.path])
    for name in src.get("results"):
        k = f"results.{name}."
        table.rows.append([text(name), src.num(k + "us_per_step", ".1f"), src.num(k + "ratio_to_v3", ".2f")])
    return table


def maze_engine() -> Table:
    """The maze's compiled rules against gymnasium's per-step API, steps per second on one core."""
    src = Source("benchmarks/results/maze_engine.json")
    table = Table(["level", "walls", "engine, steps/s", "gymnasium env, steps/s", "engine / env"], sources=[src.path])
    for name, r in src.get("results").items():
        k = f"results.{name}."
        walls = "seen through" if r["see_through_walls"] else "hide what is behind"
        table.rows.append(
            [
                text(name),
                text(walls),
                src.num(k + "engine_steps_per_s"),
                src.num(k + "env_steps_per_s"),
                src.num(k + "engine_over_env", ".0f"),
            ]
        )
    return table


def eval_pool_kinds() -> Table:
    """The pool against plain batched torch code per torch policy kind (env steps per second)."""
    src = Source("benchmarks/results/eval_pool_kinds.json")
    table = Table(
        ["row", "policy parameters", "plain code", "pool", "pool / plain code", "lowest repeat", "highest repeat"],
        sources=[src.path],
    )
    for name, row in src.get("rows").items():
        k = f"rows.{name}."
        repeats = row["pool_vs_raw_per_repeat"]
        low, high = min(range(len(repeats)), key=repeats.__getitem__), max(range(len(repeats)), key=repeats.__getitem__)
        table.rows.append(
            [
                text(f"`{row['kind']}` on {row['family']}"),
                src.num(k + "policy_params"),
                src.num(k + "raw_steps_per_s"),
                src.num(k + "pool_steps_per_s"),
                src.num(k + "pool_vs_raw", ".2f"),
                src.num(f"{k}pool_vs_raw_per_repeat.{low}", ".2f"),
                src.num(f"{k}pool_vs_raw_per_repeat.{high}", ".2f"),
            ]
        )
    return table


def ppo_lunar_lander() -> Table:
    """PPO alone on LunarLanderContinuous: mean evaluation return along the run."""
    src = Source("benchmarks/results/ppo_lunar_lander.json")
    table = Table(["iteration", "env steps", "seconds", "mean return", "std"], sources=[src.path])
    for i, _ in enumerate(src.get("curve")):
        k = f"curve.{i}."
        table.rows.append(
            [
                src.num(k + "iteration", "d"),
                src.num(k + "env_steps"),
                src.num(k + "seconds", ".1f"),
                src.num(k + "score", ".1f"),
                src.num(k + "score_std", ".1f"),
            ]
        )
    table.rows.append([text("final"), text(""), text(""), src.num("final_score", ".1f"), text("")])
    return table


ACCEL_PARTS = {
    "rollout": "PPO rollout",
    "gae": "GAE",
    "update": "minibatch epochs",
    "level_scoring": "scoring new levels (regret rollouts)",
    "evaluations": "held-out scoring",
    "rest": "the rest (curriculum, records, checkpoints)",
}


def accel_ppo() -> Table:
    """ACCEL with PPO at dcd's sizes, at this commit and the one before, beside a plain PyTorch
    PPO loop and the compiled rollout alone: ms per update by part, and the rates."""
    src = Source("benchmarks/results/accel_ppo.json")
    ways = ("accel", "accel_before", "plain")
    table = Table(["", "ACCEL", "ACCEL, the commit before", "plain PPO"], sources=[src.path])
    for part, name in ACCEL_PARTS.items():
        table.rows.append([text(f"{name}, ms per update")] + [src.num(f"ms_per_update.{way}.{part}") for way in ways])
    for key, name in (
        ("median_env_steps_per_s", "env steps/s, all"),
        ("median_trained_steps_per_s", "env steps trained on per s"),
        ("median_rollout_steps_per_s", "env steps/s within PPO's rollouts"),
    ):
        table.rows.append([text(name)] + [src.num(f"{key}.{way}") for way in ways])
    return table


def poet_cap20_1000() -> Table:
    """Throughput per phase of a 1,000-iteration POET run at the study's settings."""
    src = Source("experiments/results/poet_cap20_1000.json")
    table = Table(["phase", "seconds", "env steps", "steps/s"], sources=[src.path])
    for i, _ in enumerate(src.get("throughput")):
        k = f"throughput.{i}."
        table.rows.append(
            [
                text(src.get(k + "phase")),
                src.num(k + "seconds", ".1f"),
                src.num(k + "env_steps"),
                src.num(k + "steps_per_second"),
            ]
        )
    return table


# ---------------------------------------------------------------- experiments


def compare_curricula(path: str = "experiments/results/compare_curricula.json") -> Table:
    """The best agent's final held-out score per level: mean (min to max) over seeds."""
    src = Source(path)
    levels = ["flat", "pits", "stumps", "rough", "combined"]
    table = Table(["curriculum", *levels, "iterations", "trainer steps", "env steps"], sources=[src.path])
    for i, row in enumerate(src.get("summary")):
        k = f"summary.{i}."
        cells = [text(row["curriculum"])]
        for level in levels:
            mean, lo, hi = (src.get(f"{k}{level}.{s}") for s in ("mean", "min", "max"))
            cells.append(Cell(f"{mean:.0f} ({lo:.0f} to {hi:.0f})", src.path, f"{k}{level}.mean", fmt=".0f"))
        cells += [src.num(k + "iterations", "d"), src.num(k + "trainer_steps_mean"), src.num(k + "env_steps_mean")]
        table.rows.append(cells)
    return table


def compare_curricula_es() -> Table:
    """The same for ACCEL, robust PLR and DR trained with ES (`--set trainer.name=es`)."""
    return compare_curricula("experiments/results/compare_curricula_es.json")


def feasibility_limits() -> Table:
    """The runner's limits the planner measures, and where the paper's thresholds sit in them."""
    src = Source("experiments/results/feasibility.json")
    table = Table(
        [
            "criterion",
            "runner's limit",
            "domain maximum",
            "threshold",
            "threshold / limit",
            "POET: threshold / maximum",
        ],
        sources=[src.path],
    )
    rows = (
        ("pit gap", "pit_width_m", " m", "pit_gap", 8.0, 6.0),
        ("stump height", "stump_height_m", " m", "stump_height", 5.0, 2.4),
        ("roughness", "roughness", " units", "roughness", 10.0, 4.5),
    )
    for name, key, unit, criterion, maximum, threshold in rows:
        metres = src.get(f"limits.units.{criterion}_m") if criterion != "roughness" else 1.0
        table.rows.append(
            [
                text(name),
                src.num(f"limits.{key}", ".2f" if "stump" in key else ".1f", suffix=unit),
                text(f"{maximum:g} ({maximum * metres:.2f}{unit})" if criterion != "roughness" else f"{maximum:g}"),
                text(
                    f"{threshold:g} ({threshold * metres:.2f}{unit})" if criterion != "roughness" else f"{threshold:g}"
                ),
                src.num(f"limits.threshold_over_limit.{criterion}", ".2f"),
                src.num(f"limits.poet_threshold_over_max.{criterion}", ".2f"),
            ]
        )
    return table


def feasibility() -> Table:
    """The planner and the scripted controller on every subset of the criteria at three levels."""
    src = Source("experiments/results/feasibility.json")
    table = Table(
        ["level", "criteria", "class", "planner", "scripted", "pit widths (m)", "stump heights (m)"], sources=[src.path]
    )
    for i, row in enumerate(src.get("courses")):
        k = f"courses.{i}."
        sizes = []
        for kind in ("pit_width_m", "stump_height_m"):
            got = row["realised"][kind]
            sizes.append(text(f"{got['min']:.2f}-{got['max']:.2f}" if got else "-"))
        table.rows.append(
            [
                text(row["level"]),
                text(" + ".join(c.replace("_", " ") for c in row["criteria"])),
                src.num(k + "class", "d"),
                Cell(f"{row['planner_cleared']}/{row['seeds']}", src.path, k + "planner_cleared", fmt="d"),
                Cell(f"{row['scripted_cleared']}/{row['seeds']}", src.path, k + "scripted_cleared", fmt="d"),
                *sizes,
            ]
        )
    return table


def feasibility_roughness() -> Table:
    """The planner with roughness scaled up toward its limit."""
    src = Source("experiments/results/feasibility.json")
    table = Table(
        ["metres per roughness unit", "pits + roughness at threshold", "roughness at its maximum"], sources=[src.path]
    )
    for i, row in enumerate(src.get("roughness_scale")):
        k = f"roughness_scale.{i}."
        table.rows.append(
            [
                src.num(k + "roughness_m_per_unit", ".2f"),
                Cell(
                    f"{row['pits_and_roughness_at_threshold']}/{row['seeds']}",
                    src.path,
                    k + "pits_and_roughness_at_threshold",
                    fmt="d",
                ),
                Cell(f"{row['roughness_at_maximum']}/{row['seeds']}", src.path, k + "roughness_at_maximum", fmt="d"),
            ]
        )
    return table


def feasibility_named_levels() -> Table:
    """The planner on stairs of each step height, and on every named level of the terrain
    family's sets (dcd's test envs as this family's analogues)."""
    src = Source("experiments/results/feasibility.json")
    part = "stairs_and_named_levels."
    table = Table(["set", "level", "courses the planner clears"], sources=[src.path])
    for i, row in enumerate(src.get(part + "stairs")):
        k = f"{part}stairs.{i}."
        label = f"stair steps {row['stair_height']:g} ({row['step_m']:.2f} m), up to 8 steps"
        table.rows.append(
            [
                text("stairs"),
                text(label),
                Cell(f"{row['planner_cleared']}/{row['seeds']}", src.path, k + "planner_cleared", fmt="d"),
            ]
        )
    for name, levels in src.get(part + "sets").items():
        for level, row in levels.items():
            k = f"{part}sets.{name}.{level}.planner_cleared"
            table.rows.append(
                [text(name), text(level), Cell(f"{row['planner_cleared']}/{row['courses']}", src.path, k, fmt="d")]
            )
    return table


def course_generalisation() -> Table:
    """Agents of POET's roughest solved envs on fresh courses of their env's params."""
    src = Source("experiments/results/course_generalisation.json")
    roughness = [f["roughness"] for f in src.get("envs.0.fresh_courses")]
    table = Table(
        ["env", "params", "own course", *(f"fresh courses solved, roughness {r:g}" for r in roughness)],
        sources=[src.path],
    )
    for i, env in enumerate(src.get("envs")):
        k = f"envs.{i}."
        cells = [text(env["env_id"][:8]), text(describe(env["params"])), src.num(k + "own_course_score", ".0f")]
        for j, fresh in enumerate(env["fresh_courses"]):
            cells.append(
                Cell(f"{fresh['solved']}/{fresh['courses']}", src.path, f"{k}fresh_courses.{j}.solved", fmt="d")
            )
        table.rows.append(cells)
    return table


def partial_cartpole() -> Table:
    """PPO on CartPole without its velocities: each run's final agent on the held-out episodes."""
    src = Source("experiments/results/partial_cartpole.json")
    table = Table(
        ["policy kind", "seed", "held-out mean return", "lowest episode", "solved (mean >= 475)"],
        sources=[src.path],
        note=f"{src.get('budget.ppo_updates')} PPO updates of {src.get('budget.env_steps_per_update'):,} env steps each",
    )
    for i, run in enumerate(src.get("runs")):
        k = f"runs.{i}."
        table.rows.append(
            [
                text(f"`{run['kind']}`"),
                src.num(k + "seed", "d"),
                src.num(k + "held_out.mean_return", ".1f"),
                src.num(k + "held_out.min_return", ".0f"),
                text("yes" if run["held_out"]["solved"] else "no"),
            ]
        )
    return table


# ---------------------------------------------------------------- the study's second round
ROUND2 = "experiments/results/reproduce_poet/round2/results.json"


def study_round2_seeds(path: str = ROUND2) -> Table:
    """Per POET seed of the second round: its length and cost, the targets the plan's rule
    found per class (of how many candidates), and its population's share of the fixed courses solved."""
    src = Source(path)
    classes = sorted(src.get("fixed_courses"))
    table = Table(
        ["POET seed", "iterations", "env steps (G)", "hours", *(f"class {c}: candidates" for c in classes)]
        + [f"class {c}: targets short of 3" for c in classes]
        + [f"class {c}: fixed courses solved" for c in classes],
        sources=[path],
    )
    for i, seed in enumerate(src.get("poet")):
        k = f"poet.{i}."
        cells = [src.num(k + "seed", "d"), src.num(k + "iterations", ",d"), src.num(k + "env_steps", ".2f", 1e-9)]
        cells.append(src.num(k + "seconds", ".2f", 1 / 3600))
        cells += [src.num(f"{k}targets_rule.{c}.candidates", "d") for c in classes]
        cells += [src.num(f"{k}targets_rule.{c}.shortfall", "d") for c in classes]
        cells += [src.num(f"fixed_courses.{c}.{seed['seed']}", ".2f") for c in classes]
        table.rows.append(cells)
    return table


def study_round2_targets(path: str = ROUND2) -> Table:
    """Every target of the second round: its class on its own course beside its params' label,
    the obstacles its course holds, when POET solved it and the env steps POET spent by then."""
    src = Source(path)
    table = Table(
        ["POET seed", "class (label)", "target", "widest pit", "tallest stump", "roughness", "solved at"]
        + ["budget (G env steps)", "POET"],
        sources=[path],
    )
    for i, t in enumerate(src.get("targets")):
        k = f"targets.{i}."
        table.rows.append(
            [
                src.num(k + "poet_seed", "d"),
                src.num(k + "class", "d", suffix=f" ({t['label_class']})"),
                text(t["env_id"][:8]),
                src.num(k + "realised.pit_gap", ".2f"),
                src.num(k + "realised.stump_height", ".2f"),
                src.num(k + "realised.roughness", ".2f"),
                src.num(k + "solved_iteration", ",d"),
                src.num(k + "budget_env_steps", ".2f", 1e-9),
                src.num(k + "poet_score", ".1f"),
            ]
        )
    return table


# ------------------------------------------------- dcd's BipedalWalker benchmark
DCD = "experiments/results/dcd_bipedal/results.json"
DCD_NAMES = {"accel": "ACCEL", "robust_plr": "robust PLR", "dr": "DR", "poet": "POET"}


def _dcd_suite(metric: str, ours: str, fmt: str, scale: float, path: str) -> Table:
    """dcd's published numbers per test level, then every finished run here on `bipedal`
    (mean over its seeds): `metric` in dcd's files and `ours` in this project's."""
    src = Source(path)
    levels = list(src.get("published.accel"))
    table = Table(["curriculum", "where, budget", "seeds", *levels], sources=[path])
    for name in ("accel", "robust_plr", "dr"):
        k = f"published.{name}."
        row = [text(DCD_NAMES[name]), text("dcd, 20,000 updates"), src.num(k + levels[0] + ".seeds", ".0f")]
        table.rows.append(row + [src.num(f"{k}{level}.{metric}", fmt, scale) for level in levels])
    entry = src.get("families.bipedal")
    for name in entry["summary"]:
        k = f"families.bipedal.summary.{name}."
        updates = "; ".join(f"{u:,} updates" for u in entry["updates"])
        where = f"here, {updates}" if name != "poet" else "here, the UED runs' env steps"
        row = [text(DCD_NAMES[name]), text(where), src.num(k + levels[0] + ".seeds", "d")]
        table.rows.append(row + [src.num(f"{k}{level}.{ours}", fmt, scale) for level in levels])
    table.note = f"{len(entry['runs'])} runs here finished"
    return table


def dcd_bipedal_solved(path: str = DCD) -> Table:
    """Solved rate (%) per dcd test level: dcd's published runs, then this project's."""
    return _dcd_suite("solved_rate", "solved_rate", ".1f", 100.0, path)


def dcd_bipedal_returns(path: str = DCD) -> Table:
    """Mean test return per dcd test level: dcd's published runs, then this project's."""
    return _dcd_suite("test_returns", "mean_return", ".1f", 1.0, path)


TABLES: dict[str, Callable[[], Table]] = {
    f.__name__: f
    for f in (
        checkpoint_capture,
        eval_pool,
        eval_pool_ratios,
        eval_pool_ways,
        eval_pool_one_worker,
        eval_pool_bipedal_family,
        eval_pool_kinds,
        raw_widths,
        pool_waves,
        compiled_graph,
        chunk_cost,
        quickstart,
        quickstart_waves,
        backends,
        small_waves,
        quickstart_vs_numpy_core,
        bipedal_step,
        maze_engine,
        ppo_lunar_lander,
        accel_ppo,
        poet_cap20_1000,
        compare_curricula,
        compare_curricula_es,
        feasibility_limits,
        feasibility,
        feasibility_roughness,
        feasibility_named_levels,
        course_generalisation,
        partial_cartpole,
        study_round2_seeds,
        study_round2_targets,
        dcd_bipedal_solved,
        dcd_bipedal_returns,
    )
}


if __name__ == "__main__":  # print every table: python docs/hooks/docs_tables.py [NAME ...]
    for name in sys.argv[1:] or TABLES:
        print(f"## {name}\n\n{TABLES[name]().markdown()}")
