"""POET's claim at the paper's difficulty classes, at three POET seeds: what POET solves per
class, what its controls solve there, and Enhanced POET's ANNECS against the original's.

    python experiments/reproduce_poet.py            # many hours on 2 cores; run it again to resume
    python experiments/reproduce_poet.py --quick    # a smoke run, into a temporary directory

1. **POET** on `terrain`, seeds 0 .. `--poet-seeds` - 1, `--iterations` each (10,000), with
   the study's schedule over `experiments/reproduce_poet.yaml` (`annecs_poet_vs_enhanced.py`:
   capacity 20, a transfer and a reproduction every 25 iterations, up to 2 admitted).
2. **Targets.** Per POET seed and class of `--classes` (1-3: the paper's claim is about the
   challenging classes), the `--targets` hardest envs POET solved (each criterion's value
   over its threshold, summed). An env that is a target of two seeds counts once.
3. **Controls on every target**, `--control-seeds` seeds each, with POET's trainer settings:
   - `direct`: ES from a fresh agent on the target's own course (its params and course seed);
   - `path`: the direct-path curriculum, 10 equal stages from the flat course to the target,
     the last on the target's own course;
   both for `BUDGET_FACTOR` (2) times the trainer steps of the target's POET lineage, with the
   iteration at which ES's noise reached its floor (`sigma_floor`) recorded;
   - `accel` and `dr`, which never see the target: one run per POET seed, class and control
     seed until it has taken the env steps of that class's longest direct run, scored on
     each of its targets.
   A run's score on a target: for `direct` and `path` the best score it recorded on it; for
   `accel` and `dr` their final agents' best on it; POET's, the best score an agent of its
   run recorded on it (`poet_best`: the agent the env was admitted with, its pair's ES
   evaluations, the transfers its pair accepted).
   Control runs evaluate in their own process (a wave of one agent on one level is too
   small to spread over workers) and run side by side as Ray tasks, one per CPU of the
   study's Ray (no number depends on where or beside what a run ran).
4. **Statistics at the target.** Per class and control, the mean over targets of POET's
   score minus the control's mean over its seeds, with a bootstrap 95% interval
   (`study_stats.py`). `results.json` also holds the one-sided sign-flip test of those
   differences, with Holm's adjustment, but the tables leave its p-values out: the targets
   are envs POET solved, so the test's null is known false in advance (docs/study.md).
5. **ANNECS**: POET and Enhanced POET (on `terrain_cppn`) at seeds 0 .. `--annecs-seeds` - 1,
   the same schedule and iterations; the cost of each arm by phase. (These runs go right
   after part 1, before the controls.)

Every run is resumable: rerunning the command resumes each run directory where it stopped (a
finished one costs nothing). `results.json` (every number, with the phase seconds of every
run), `results.md`, `scores.png`, `climb.png` and `annecs.png` go to `--results`:
`experiments/results/reproduce_poet/` for the full study; `--quick` writes only to a
temporary directory or to a `--results` outside `experiments/results/`.
"""

from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import poet
from envs import EnvParams
from envs.terrain import DIFFICULTY_CLASSES, DIFFICULTY_CRITERIA, describe
from poet.analysis import Run, load_run
from poet.config import changes_results
from poet.errors import RunInterrupted
from poet.records import read_rows
from poet.trainers.es import ESOptions

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT / "experiments"))  # the sibling scripts this study runs
import annecs_poet_vs_enhanced as arms  # noqa: E402
import study_stats  # noqa: E402
from difficulty_climb import climb  # noqa: E402

CONFIG = arms.CONFIG
CONTROLS = ("direct", "path", "accel", "dr")
# ACCEL and DR run this many iterations first, then as many more as their own rate of env
# steps says they need to match the direct runs' (a cycle of 16 levels costs far more env
# steps than an ES step on one env, so a longer first stretch would overshoot)
FIRST_STRETCH = 200
# controls get twice the lineage's trainer steps; the paper's own budget is unverified (docs/study.md)
BUDGET_FACTOR = 2
# Where a control run runs, which changes none of its numbers (so a resume passes it too): in
# its own process (its waves are too small to spread: the module docstring, part 3), and a
# checkpoint every 500 iterations, as an iteration takes milliseconds and a checkpoint, with
# its fsyncs, tens of them (every 25 cost a quarter of a direct run's time)
CONTROL_WHERE = ["evaluation.backend=inprocess", "checkpoint.every=500"]
QUICK_CONTROL = [
    "env.options={course_length: 20.0, max_episode_steps: 150}",
    "trainer.es.population=8",
    "evaluation.eval_episodes=1",
]


# ------------------------------------------------------------------------------ runs
def run_or_resume(out: Path, overrides: list[str], iterations: int, config: Path | dict = CONFIG) -> float:
    """Run `config` with `overrides` into `out`, or resume it there to `iterations` with those
    of its overrides that may change at a resume (where it runs, its checkpoints: `WHERE_ONLY`
    in poet/config.py); the seconds it ran (0 for a run already there)."""
    if (out / "checkpoints").is_dir():
        where = [o for o in overrides if not changes_results(o.split("=", 1)[0].strip())]
        return poet.resume(out, iterations=iterations, progress=False, overrides=where).seconds
    return poet.run(config, out=out, overrides=[*overrides, f"iterations={iterations}"], progress=False).seconds


def env_steps(run: Run) -> int:
    """Env steps a run took, every phase."""
    return int(run.phases["env_steps"].sum())


def phase_env_steps(out: Path, before: int) -> int:
    """Env steps the run in `out` took in its iterations before `before`, from its phases table
    alone (an ACCEL run's envs and events tables are far bigger)."""
    return sum(int(row["env_steps"]) for row in read_rows(out, "phases") if row["iteration"] < before)


def write_json(path: Path, data: dict) -> None:
    """A finished run's results file, whole (its folder made if need be)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".tmp-{path.name}")
    tmp.write_text(json.dumps(data, indent=1) + "\n")
    tmp.replace(path)  # a file that exists is complete: scripts skip runs whose file exists


def match_env_steps(out: Path, overrides: list[str], goal: int, first: int, config: Path | dict = CONFIG) -> float:
    """Run `out` for `first` iterations, then resume it further until it has taken at least
    `goal` env steps, each time to the iteration its own rate so far says; the seconds it ran.

    Each target follows from the run's steps at the one before, so a study interrupted and run
    again reaches the same iteration (a resumed run equals one run straight to it)."""
    target, seconds = first, 0.0
    while True:
        seconds += run_or_resume(out, overrides, target, config)
        steps = phase_env_steps(out, before=target)
        if steps >= goal:
            return seconds
        target = max(target + 1, math.ceil(target * goal / max(steps, 1)))


def control_overrides(name: str, target: EnvParams, seed: int, quick: bool) -> list[str]:
    """The config of one control run: POET's trainer settings, a fresh agent, its curriculum."""
    over = [*(QUICK_CONTROL if quick else []), *CONTROL_WHERE, f"curriculum={name}", f"seed={100 + seed}"]
    if name == "direct":
        over.append(f"env.start={json.dumps(target.to_dict())}")
    if name == "path":
        over.append(f"curriculum_options={json.dumps({'target': target.to_dict(), 'stages': 10})}")
    if name == "accel":
        over.append("curriculum_options={buffer_size: 100}")  # dcd's 16 levels per cycle, a buffer scaled down
    if name == "dr":
        over.append("curriculum_options={num_levels: 1}")  # one new level per ES step (dcd trains on 16 with PPO)
    return over


# --------------------------------------------------------------------------- targets
def hardness(values: dict) -> float:
    """How far a course goes past the paper's criteria: each value over its threshold, summed."""
    top = {
        "roughness": float(values["roughness"]),
        "pit_gap": float(values["pit_gap"][-1]) if values["pit_gap"] else 0.0,
        "stump_height": float(values["stump_height"][-1]) if values["stump_height"] else 0.0,
    }
    return sum(top[k] / v for k, v in DIFFICULTY_CRITERIA.items())


def pick_targets(run: Run, per_class: int) -> dict[int, list[str]]:
    """Up to `per_class` solved envs of each class the run reached, hardest first."""
    solved = run.envs[run.envs["solved_iteration"].notna()]
    picked = {}
    for level in sorted(int(c) for c in solved["difficulty"].dropna().unique()):
        rows = solved[solved["difficulty"] == level]
        order = sorted(rows.itertuples(), key=lambda r: -hardness(json.loads(r.params_json)["values"]))
        picked[level] = [r.env_id for r in order[:per_class]]
    return picked


def lineage_steps(run: Run, env_id: str) -> int:
    """Trainer steps along the chain of envs from the start env to `env_id`: each env on the
    chain counted from its creation until the next env of the chain was created, the target
    until the iteration it was solved (one ES step per pair and iteration)."""
    envs = run.envs.set_index("env_id")
    chain, node = [], env_id
    while isinstance(node, str):
        chain.append(node)
        node = envs.loc[node, "parent_env_id"] if node in envs.index else None
    chain.reverse()
    ends = [int(envs.loc[e, "created_iteration"]) for e in chain[1:]] + [int(envs.loc[env_id, "solved_iteration"])]
    rows = run.iterations
    steps = 0
    for env, end in zip(chain, ends):
        mine = rows[(rows["env_id"] == env) & (rows["iteration"] <= end)]
        steps += int(mine["iteration"].nunique())
    return steps


# ---------------------------------------------------------------------------- scores
def best_recorded(run: Run, env_id: str) -> float | None:
    """The best score a pair of the run recorded on this env (None: never trained on it)."""
    rows = run.iterations[run.iterations["env_id"] == env_id]
    return float(rows["score"].max()) if len(rows) else None


def poet_best(run: Run, env_id: str) -> float | None:
    """The best score an agent of a POET run recorded on this env: the agent it was admitted
    with (the child's transfer score), its pair's ES evaluations and every transfer its pair
    accepted. An env can be solved by the agent it was admitted with, and ES may then lose
    that score, so the pair's ES evaluations alone can miss the score that solved it."""
    scores = [best_recorded(run, env_id)]
    pair_ids = set(run.envs.loc[run.envs["env_id"] == env_id, "pair_id"])
    transfers = run.transfers
    if len(transfers):
        accepted = transfers[transfers["accepted"].astype(bool) & transfers["target_pair_id"].isin(pair_ids)]
        scores += [float(v) for v in accepted["score"]]
    events = run.events
    if len(events):
        admitted = events[(events["kind"] == "admitted") & (events["env_id"] == env_id)]
        scores += [json.loads(d or "{}").get("transfer_score") for d in admitted["detail"]]
    found = [float(v) for v in scores if v is not None]
    return max(found) if found else None


def final_scores(run_dir: Path, targets: list[EnvParams]) -> list[float]:
    """The best final agent of a run on each target's own course (the run's evaluation settings)."""
    from poet.analysis.render import load_agents
    from poet.evaluation import EvalRequest, InProcessEvaluator

    parts, snapshot = load_agents(run_dir)
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    agents = snapshot.state.population.active
    refs = [evaluator.put(a.theta) for a in agents]
    ev = parts.cfg.evaluation
    requests = [
        EvalRequest(ref, target, ev.eval_episodes, 0, ev.max_steps, tag=a.pair_id)
        for target in targets
        for a, ref in zip(agents, refs)
    ]
    means = np.array([r.mean for r in evaluator.evaluate(requests)]).reshape(len(targets), len(agents))
    return [float(m) for m in means.max(axis=1)]


def scores_of(name: str, run_dir: Path, run: Run, targets: list[tuple[EnvParams, str]]) -> list[float]:
    """A control run's score on each of its (target, env id)s (see the module docstring); `run`
    is its loaded records."""
    best = [best_recorded(run, env_id) if name in ("direct", "path") else None for _, env_id in targets]
    unscored = [params for (params, _), b in zip(targets, best) if b is None]
    finals = iter(final_scores(run_dir, unscored) if unscored else [])
    return [b if b is not None else next(finals) for b in best]


# ------------------------------------------------------------------------- the parts
def sigma_floor_iteration(run: Run) -> int | None:
    """The first iteration at which ES's noise was at its floor (None: it never got there)."""
    floor = float(run.config["trainer"]["es"].get("sigma_floor", ESOptions().sigma_floor))
    at = run.iterations.loc[run.iterations["sigma"] <= floor * (1 + 1e-9), "iteration"]
    return int(at.min()) if len(at) else None


def phase_seconds(run: Run) -> float:
    """Seconds a run spent in its phases, over every resume."""
    return float(run.phases["seconds"].sum())


def poet_seed(seed: int, args: argparse.Namespace) -> dict:
    """Part 1 for one seed: the run, its climb and its classes."""
    entry = arms.run_arm("poet", seed, args.iterations, args.out, args.quick)
    run_dir = Path(entry["run_dir"])
    report = climb(run_dir, every=max(1, args.iterations // 20))
    return {
        "seed": seed,
        "run_dir": entry["run_dir"],
        "iterations": entry["iterations"],
        "classes": report["classes"],
        "climb": report["solved_envs_over_iterations"],
        "seconds": phase_seconds(load_run(run_dir)),
    }


def targets_of(seeds: list[dict], args: argparse.Namespace) -> list[dict]:
    """Part 2: each seed's hardest solved envs per class; an env already a target counts once."""
    targets: dict[str, dict] = {}
    for s in seeds:
        run = load_run(Path(s["run_dir"]))
        envs = run.envs.set_index("env_id")
        for level, ids in pick_targets(run, args.targets).items():
            if level not in args.classes:
                continue
            for env_id in ids:
                if env_id in targets:
                    targets[env_id]["also_target_of_seeds"].append(s["seed"])
                    continue
                steps = lineage_steps(run, env_id)
                params = json.loads(envs.loc[env_id, "params_json"])
                targets[env_id] = {
                    "poet_seed": s["seed"],
                    "class": level,
                    "env_id": env_id,
                    "params": params["values"],
                    "course_seed": params.get("course_seed"),
                    "hardness": hardness(params["values"]),
                    "solved_iteration": int(envs.loc[env_id, "solved_iteration"]),
                    "lineage_steps": steps,
                    "budget": BUDGET_FACTOR * max(1, steps),
                    "poet_score": poet_best(run, env_id),
                    "also_target_of_seeds": [],
                    "controls": {},
                }
    return list(targets.values())


def control_records(
    name: str, out: Path, targets: list[tuple[EnvParams, str]], seed: int, threshold: float
) -> list[dict]:
    """One control run's numbers on each of its (target, env id)s, its records read once."""
    run = load_run(out)
    common = {
        "seed": seed,
        "run_dir": str(out),
        "iterations": int(run.phases["iteration"].max()) + 1,
        "env_steps": env_steps(run),
    }
    after = {"seconds": phase_seconds(run)}
    if name in ("direct", "path"):
        after["sigma_floor_iteration"] = sigma_floor_iteration(run)
    return [
        {**common, "score": score, "solved": bool(score >= threshold), **after}
        for score in scores_of(name, out, run, targets)
    ]


def control_run(out: Path, overrides: list[str], iterations: int, goal: int | None = None) -> float:
    """Run or resume one control run to `iterations`, or, given `goal`, on until it has taken
    `goal` env steps (`match_env_steps`, `iterations` its first stretch); the seconds it ran."""
    if goal is None:
        return run_or_resume(out, overrides, iterations)
    return match_env_steps(out, overrides, goal, iterations)


def run_all(calls: list[tuple], what: str, run=None, cost_at: int = -1) -> None:
    """`run(*call)` (default `control_run`) for every call (its item `cost_at` is its cost:
    iterations or env steps), the costliest first, as Ray tasks of one CPU each: as many at once as the cluster
    has CPUs. A line per finished run says how far the calls are, by cost, and the time left
    at the rate of the runs that ran in this call (runs finished before count as done).

    Interrupted (Ctrl-C, SIGTERM) or when a run fails, it asks the runs in progress to stop,
    which checkpoint their last iteration, and waits a little for them."""
    import ray

    calls = sorted(calls, key=lambda call: -call[cost_at])
    task = ray.remote(num_cpus=1, max_retries=0)(run or control_run)
    refs = [task.remote(*call) for call in calls]
    cost = dict(zip(refs, (call[cost_at] for call in calls)))
    total = sum(cost.values())
    t0, pending, done_cost, ran_cost = time.perf_counter(), list(refs), 0, 0
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            done_cost += cost[done[0]]
            ran_cost += cost[done[0]] if ray.get(done[0]) > 0 else 0
            seconds = time.perf_counter() - t0
            if not pending:
                left = "done"
            elif ran_cost:
                left = f"about {seconds * (total - done_cost) / ran_cost / 60:.0f} min left"
            else:  # so far only runs that had finished before this call
                left = "time left not known yet"
            print(
                f"  {what}: {len(refs) - len(pending)}/{len(refs)} runs, {done_cost / total:.0%} of the cost, "
                f"{seconds / 60:.0f} min, {left}",
                flush=True,
            )
    except BaseException:  # Ctrl-C, SIGTERM or a failed run: the others stop too
        for ref in pending:
            ray.cancel(ref)
        if pending:
            ray.wait(pending, num_returns=len(pending), timeout=30)
        raise


def target_params(target: dict) -> EnvParams:
    """A target's env as POET had it, its course included: `direct` trains on it, `path` ends
    on it, and every control is scored on it."""
    params = EnvParams.create("terrain", target["params"], target["course_seed"])
    if params.id != target["env_id"]:
        raise RuntimeError(f"target {target['env_id']}: its params and course give env {params.id}")
    return params


def run_controls(targets: list[dict], args: argparse.Namespace, threshold: float) -> None:
    """Part 3: every control of every target, in place in `targets`."""
    params = {t["env_id"]: target_params(t) for t in targets}

    def run_and_record(jobs: list[tuple[list[dict], str, int, tuple]], what: str) -> None:
        """Each job's `control_run` call, then its run's record on each target of its group."""
        run_all([call for *_, call in jobs], what)
        for group, name, seed, (out, *_) in jobs:
            records = control_records(name, out, [(params[t["env_id"]], t["env_id"]) for t in group], seed, threshold)
            for t, record in zip(group, records):
                t["controls"].setdefault(name, []).append(record)

    jobs = []
    for t in targets:  # direct and path, per target
        for name in ("direct", "path"):
            for seed in range(args.control_seeds):
                out = args.out / "controls" / f"{t['env_id'][:8]}-{name}-seed{seed}"
                over = control_overrides(name, params[t["env_id"]], seed, args.quick)
                jobs.append(([t], name, seed, (out, over, t["budget"])))
    run_and_record(jobs, "direct and path")
    groups: dict[tuple[int, int], list[dict]] = {}
    for t in targets:
        groups.setdefault((t["poet_seed"], t["class"]), []).append(t)
    jobs = []
    for (seed_of_poet, level), group in groups.items():  # ACCEL and DR, per POET seed and class
        goal = max(r["env_steps"] for t in group for r in t["controls"]["direct"])
        first = min(FIRST_STRETCH, max(t["budget"] for t in group))
        for name in ("accel", "dr"):
            for seed in range(args.control_seeds):
                out = args.out / "controls" / f"seed{seed_of_poet}-class{level}-{name}-seed{seed}"
                over = control_overrides(name, params[group[0]["env_id"]], seed, args.quick)
                jobs.append((group, name, seed, (out, over, first, goal)))
    run_and_record(jobs, "accel and dr")


def class_statistics(seeds: list[dict], targets: list[dict], args: argparse.Namespace, threshold: float) -> list[dict]:
    """Part 4: per class, what each POET seed reached and each control against POET on its targets."""
    classes = []
    for level in args.classes:
        name = DIFFICULTY_CLASSES[level]
        mine = [t for t in targets if t["class"] == level]
        entry = {
            "class": level,
            "name": name,
            "per_seed": [{"seed": s["seed"], **s["classes"][name]} for s in seeds],
            "seeds_solving": sum(s["classes"][name]["solved"] > 0 for s in seeds),
            "targets": len(mine),
            "controls": {},
        }
        for control in CONTROLS:
            runs = [[r["score"] for r in t["controls"].get(control, [])] for t in mine]
            scores = [x for r in runs for x in r]
            entry["controls"][control] = {
                "runs": len(scores),
                "reached_threshold": int(sum(x >= threshold for x in scores)),
                "best": max(scores) if scores else None,
                "median": float(np.median(scores)) if scores else None,
                "env_steps_median": float(
                    np.median([r["env_steps"] for t in mine for r in t["controls"].get(control, [])])
                )
                if scores
                else None,
                "test": study_stats.compare_at_targets([t["poet_score"] for t in mine], runs, threshold),
            }
        classes.append(entry)
    tests = study_stats.adjust_page([c["controls"][k]["test"] for c in classes for k in CONTROLS])
    for i, (c, k) in enumerate((c, k) for c in classes for k in CONTROLS):
        c["controls"][k]["test"] = tests[i]
    return classes


def annecs_part(args: argparse.Namespace) -> dict:
    """Part 5: both POETs at the ANNECS seeds (POET's are part 1's runs); ANNECS every 1,000
    iterations and each arm's cost by phase and by block of iterations."""
    runs = [
        arms.run_arm(arm, seed, args.iterations, args.out, args.quick)
        for seed in range(args.annecs_seeds)
        for arm in arms.ARMS
    ]
    every = 1000 if args.iterations >= 2000 else max(1, args.iterations // 4)
    marks = [*range(every, args.iterations, every), args.iterations]
    table = [{"iteration": m, **{f"{r['arm']}-seed{r['seed']}": r["annecs_curve"][m - 1] for r in runs}} for m in marks]
    cost = {}
    for r in runs:
        phases = load_run(Path(r["run_dir"])).phases
        by_phase = phases.groupby("phase")[["seconds", "env_steps"]].sum()
        blocks = phases.assign(block=phases["iteration"] // every).pivot_table(
            index="block", columns="phase", values=["seconds", "env_steps"], aggfunc="sum", fill_value=0
        )
        cost[f"{r['arm']}-seed{r['seed']}"] = {
            "seconds": float(by_phase["seconds"].sum()),
            "by_phase": {k: float(v) for k, v in by_phase["seconds"].items()},
            "by_phase_per_block": {k: [float(v) for v in blocks["seconds"][k]] for k in blocks["seconds"].columns},
            # the work itself, the same on any machine: where it goes as the run goes on
            # (Enhanced POET's PATA-EC, in `reproduce`, scores every child against every
            # active and archived agent)
            "env_steps": int(by_phase["env_steps"].sum()),
            "env_steps_by_phase": {k: int(v) for k, v in by_phase["env_steps"].items()},
            "env_steps_by_phase_per_block": {
                k: [int(v) for v in blocks["env_steps"][k]] for k in blocks["env_steps"].columns
            },
        }
    return {"every": every, "runs": runs, "table": table, "cost": cost}


# ------------------------------------------------------------------------------ main
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=10_000)
    parser.add_argument("--poet-seeds", type=int, default=3)
    parser.add_argument("--annecs-seeds", type=int, default=2, help="seeds of both POETs in the ANNECS comparison")
    parser.add_argument("--control-seeds", type=int, default=3)
    parser.add_argument("--targets", type=int, default=3, help="solved envs per POET seed and class")
    parser.add_argument("--classes", type=int, nargs="+", default=[1, 2, 3], help="classes with targets")
    parser.add_argument("--out", type=Path, default=None, help="run directories (default runs/reproduce)")
    parser.add_argument("--results", type=Path, default=None, help=f"default {RESULTS / 'reproduce_poet'}")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process, never the results")
    args = parser.parse_args()
    if args.quick:
        if args.results is not None and args.results.resolve().is_relative_to(RESULTS):
            parser.error("--quick never writes into experiments/results/; give --results elsewhere or none")
        scratch = Path(tempfile.mkdtemp(prefix="reproduce_poet-quick-"))
        args.out = args.out or scratch / "runs"
        args.results = args.results or scratch / "results"
        args.iterations, args.poet_seeds, args.annecs_seeds, args.control_seeds = 12, 2, 1, 1
        args.targets, args.classes = 1, [0, 1, 2, 3]
    args.out = args.out or Path("runs/reproduce")
    args.results = args.results or RESULTS / "reproduce_poet"
    return args


def main() -> None:
    args = parse_args()
    t0 = time.perf_counter()
    # one Ray instance for the whole study: its POET runs' pools (--quick: in-process) and its
    # control runs, spread as tasks
    from poet.runtime.ray_session import ensure_ray

    ensure_ray(None)
    # SIGTERM ends the study as Ctrl-C does, not as Ray's handler (set by ray.init) would:
    # during a POET run, the run's own handler takes it and saves a checkpoint first; during
    # the controls, `run_all` has the runs in progress save theirs
    signal.signal(signal.SIGTERM, _interrupt)
    command = "python experiments/reproduce_poet.py" + (
        " --quick"
        if args.quick
        else f" --iterations {args.iterations} --poet-seeds {args.poet_seeds} --annecs-seeds {args.annecs_seeds}"
        f" --control-seeds {args.control_seeds} --targets {args.targets}"
        f" --classes {' '.join(map(str, args.classes))}"
    )
    result: dict = {
        "command": command,
        "config": str(CONFIG.relative_to(ROOT)),
        "structure": arms.QUICK if args.quick else arms.STRUCTURE,
        "budget_factor": BUDGET_FACTOR,
        "budget_rule": f"direct and path: {BUDGET_FACTOR} x the trainer steps of the target's POET lineage; "
        "accel and dr: the env steps of the longest direct run of the target's POET seed and class",
    }
    seeds = [poet_seed(seed, args) for seed in range(args.poet_seeds)]
    threshold = float(load_run(Path(seeds[0]["run_dir"])).config["solved_threshold"])
    result["solved_threshold"] = threshold
    result["poet"] = seeds
    print(f"POET: {len(seeds)} seeds done ({time.perf_counter() - t0:.0f} s)", flush=True)
    # Enhanced POET right after POET: the ANNECS part is done before the many control runs
    result["annecs"] = annecs_part(args)
    print(f"ANNECS arms done ({time.perf_counter() - t0:.0f} s)", flush=True)
    targets = targets_of(seeds, args)
    run_controls(targets, args, threshold)
    result["targets"] = targets
    result["classes"] = class_statistics(seeds, targets, args, threshold)
    result["parts_seconds"] = {
        "poet": sum(s["seconds"] for s in seeds),
        # each control run once, though ACCEL's and DR's are scored on several targets
        **{
            k: sum({r["run_dir"]: r["seconds"] for t in targets for r in t["controls"].get(k, [])}.values())
            for k in CONTROLS
        },
        "enhanced_poet": sum(c["seconds"] for k, c in result["annecs"]["cost"].items() if k.startswith("enhanced")),
    }
    result["seconds_this_call"] = round(time.perf_counter() - t0, 1)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "results.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    (args.results / "results.md").write_text(tables(result))
    figures(result, args.results)
    print((args.results / "results.md").read_text())
    print(f"wall time of this call {result['seconds_this_call']:.0f} s; results in {args.results}")


# --------------------------------------------------------------------------- outputs
def number(value: float | None, fmt: str, scale: float = 1.0, suffix: str = "") -> str:
    return "n/a" if value is None else f"{value * scale:{fmt}}{suffix}"


def markdown(headers: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(headers) + " |",
        "|---" * len(headers) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def tables(result: dict) -> str:
    """Markdown, the tables of docs/study.md (docs/hooks/study_tables.py builds the same cells
    from results.json, each number with its key): per class and control; per target; POET's
    classes per seed; its largest obstacles per seed; ANNECS; each ANNECS arm's cost by phase
    and its reproduce phase per block; the seconds of every part."""
    threshold, n_seeds = result["solved_threshold"], len(result["poet"])
    rows = []
    for c in result["classes"]:
        for i, name in enumerate(CONTROLS):
            s, t = c["controls"][name], c["controls"][name]["test"]
            head = [f"{c['class']} {c['name']}", f"{c['seeds_solving']}/{n_seeds}", str(c["targets"])]
            diff = (
                "n/a"
                if t["mean_difference"] is None
                else f"{t['mean_difference']:.0f} [{t['ci95'][0]:.0f}, {t['ci95'][1]:.0f}]"
            )
            rows.append(
                (head if i == 0 else ["", "", ""])
                + [
                    name,
                    f"{s['reached_threshold']}/{s['runs']}",
                    f"{t['control_targets_solved']}/{t['k']}",
                    number(s["best"], ".0f"),
                    number(s["env_steps_median"], ".1f", 1e-6, " M"),
                    diff,
                ]
            )
    lines = markdown(
        [
            "class",
            "POET seeds solving one",
            "targets",
            "control",
            f"runs >= {threshold:g}",
            "targets a run solved",
            "best",
            "env steps per run (median)",
            "mean difference (POET - control) [95% CI], descriptive",
        ],
        rows,
    )
    rows = []
    for t in result["targets"]:
        cells = []
        for n in CONTROLS:
            runs = t["controls"].get(n, [])
            best = max((r["score"] for r in runs), default=None)
            cells.append(f"{number(best, '.0f')} ({sum(r['solved'] for r in runs)}/{len(runs)})")
        floors = [r.get("sigma_floor_iteration") for r in t["controls"].get("direct", [])]
        rows.append(
            [
                str(t["poet_seed"]),
                str(t["class"]),
                f"{t['env_id'][:8]} ({describe(t['params'])})",
                f"{t['solved_iteration']:,}",
                f"{t['lineage_steps']:,}",
                f"{t['budget']:,}",
                f"{t['poet_score']:.0f}",
                *cells,
                ", ".join("never" if f is None else str(f) for f in floors),
            ]
        )
    lines += [""] + markdown(
        [
            "POET seed",
            "class",
            "target",
            "solved at",
            "lineage steps",
            "budget",
            "POET",
            *(f"{n}: best (solved)" for n in CONTROLS),
            "direct: noise at floor from",
        ],
        rows,
    )
    rows = [
        [str(s["seed"])]
        + [
            f"{c['created']} / {c['solved']}" + (f" (first at {c['first_solved_iteration']:,})" if c["solved"] else "")
            for c in s["classes"].values()
        ]
        for s in result["poet"]
    ]
    lines += [""] + markdown(["POET seed", *DIFFICULTY_CLASSES], rows)
    rows = []
    for s in result["poet"]:
        every = max(1, s["iterations"] // 4)
        for r in s["climb"]:
            if (r["iteration"] + 1) % every == 0:
                rows.append(
                    [str(s["seed"]), f"{r['iteration'] + 1:,}", str(r["envs_solved"])]
                    + [number(r[f"max_{name}"], ".1f") for name in DIFFICULTY_CRITERIA]
                )
    lines += [""] + markdown(
        [
            "POET seed",
            "by iteration",
            "envs solved",
            *(f"largest {name.replace('_', ' ')}" for name in DIFFICULTY_CRITERIA),
        ],
        rows,
    )
    a = result["annecs"]
    names = [k for k in a["table"][0] if k != "iteration"]
    lines += [""] + markdown(
        ["iteration", *names], [[f"{row['iteration']:,}", *(str(row[n]) for n in names)] for row in a["table"]]
    )
    phases = sorted({p for c in a["cost"].values() for p in c["by_phase"]})
    rows = [
        [name, f"{c['seconds'] / 3600:.2f}", *(f"{c['by_phase'].get(p, 0.0) / 3600:.2f}" for p in phases)]
        + [f"{c['env_steps'] / 1e6:,.0f}", *(f"{c['env_steps_by_phase'].get(p, 0) / 1e6:,.0f}" for p in phases)]
        for name, c in a["cost"].items()
    ]
    lines += [""] + markdown(
        ["arm", "hours", *(f"{p} (hours)" for p in phases), "M env steps", *(f"{p} (M env steps)" for p in phases)],
        rows,
    )
    per_block = {name: c["env_steps_by_phase_per_block"].get("reproduce", []) for name, c in a["cost"].items()}
    rows = [
        [f"{j * a['every'] + 1:,}-{(j + 1) * a['every']:,}"]
        + [number((steps[j : j + 1] or [None])[0], ".1f", 1e-6) for steps in per_block.values()]
        for j in range(max(map(len, per_block.values()), default=0))
    ]
    lines += [""] + markdown(["iterations", *(f"{name}: reproduce (M env steps)" for name in per_block)], rows)
    lines += [""] + markdown(
        ["part", "hours (its runs' own seconds, summed)"],
        [[name, f"{seconds / 3600:.2f}"] for name, seconds in result["parts_seconds"].items()],
    )
    return "\n".join(lines) + "\n"


def figures(result: dict, out: Path) -> list[Path]:
    """scores.png, climb.png and annecs.png in `out`, from the results (docs/make_pictures.py redraws them)."""
    paths = [out / "scores.png", out / "climb.png", out / "annecs.png"]
    scores_figure(result, paths[0])
    climb_figure(result, paths[1])
    arms.figure(result["annecs"]["runs"], paths[2])
    return paths


def scores_figure(result: dict, path: Path) -> None:
    """Every target's POET score and each control's runs on it, per class, with the solved threshold."""
    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.add_subplot()
    names = ["POET", *CONTROLS]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for j, c in enumerate(result["classes"]):
            mine = [t for t in result["targets"] if t["class"] == c["class"]]
            ys = (
                [t["poet_score"] for t in mine]
                if name == "POET"
                else [r["score"] for t in mine for r in t["controls"].get(name, [])]
            )
            xs = j + (i - (len(names) - 1) / 2) * width + np.linspace(-0.3, 0.3, len(ys)) * width
            ax.scatter(xs, ys, s=14, color=f"C{i}", label=name if j == 0 else None)
    ax.axhline(result["solved_threshold"], color="k", ls="--", lw=1, label=f"solved ({result['solved_threshold']:g})")
    ax.set_xticks(range(len(result["classes"])), [f"{c['class']}: {c['name']}" for c in result["classes"]])
    ax.set(
        xlabel="the POET paper's difficulty class of the target",
        ylabel="score on the target",
        title="POET's solved envs against its controls, per class (every target, every seed)",
    )
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.savefig(path, dpi=100)


def climb_figure(result: dict, path: Path) -> None:
    """The largest value of each criterion among POET's solved envs over iterations, per seed."""
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    styles = ["-", "--", ":", "-."]
    for s in result["poet"]:
        rows = s["climb"]
        for i, (name, threshold) in enumerate(DIFFICULTY_CRITERIA.items()):
            ys = [np.nan if r[f"max_{name}"] is None else r[f"max_{name}"] / threshold for r in rows]
            ax.plot(
                [r["iteration"] + 1 for r in rows],
                ys,
                color=f"C{i}",
                ls=styles[s["seed"] % len(styles)],
                label=f"max {name} / {threshold:g}" if s["seed"] == 0 else None,
            )
    ax.axhline(1.0, color="k", lw=1, label="the paper's criterion")
    ax.set(
        xlabel="iteration",
        ylabel="largest among solved envs / criterion",
        title="How far POET's solved envs climb towards the paper's criteria (line style: seed)",
    )
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=100)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    try:
        main()
    except RunInterrupted as exc:  # Ctrl-C or SIGTERM: the run in progress saved a checkpoint
        print(f"reproduce_poet: {exc}; run the same command again to resume the whole study", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("reproduce_poet: interrupted; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
