"""The reproduction study's second round, as `docs/study-plan.md` fixed it before its runs:
POET at eight seeds, its targets by the realised class of their courses, and controls given
the env steps POET spent.

    python experiments/reproduce_poet_round2.py poet --seed 0       # one POET seed: 10,000 iterations
    python experiments/reproduce_poet_round2.py controls --seed 0   # that seed's compute-matched controls
    python experiments/reproduce_poet_round2.py ued --seed 0        # ACCEL and DR with dcd's PPO, per class
    python experiments/reproduce_poet_round2.py annecs --curriculum enhanced_poet --family terrain --seed 0
    python experiments/reproduce_poet_round2.py analyse             # results.json and results.md
    python experiments/reproduce_poet_round2.py status              # what is done, from the committed files
    python experiments/reproduce_poet_round2.py poet --seed 0 --quick   # a smoke run, into a temporary directory

Every part is resumable (run the same command again) and writes one JSON file per finished
run under `--results` (`experiments/results/reproduce_poet/round2/`), so the study does not
depend on its run directories (`--out`, `runs/round2/`) surviving:

1. **`poet --seed S`**: POET on `terrain` at seed S with the first round's config and schedule
   (`experiments/reproduce_poet.yaml` with `annecs_poet_vs_enhanced.STRUCTURE`), then
   `poet/seedS.json`:
   - every solved env's label class (its params), realised class (its course), widest pit,
     tallest stump, roughness and excess (`excess`);
   - the targets by the plan's rule (`pick_targets`), each with its budget: the env steps the
     whole run took up to the iteration that solved it;
   - the best of POET's active and archived agents on each fixed course of
     `fixed_courses.json`, five episodes each (the plan's selection-free design);
   - the run's code commits, its seconds and its env steps.
2. **`controls --seed S`**: per target of seed S, `direct` (every class) and `path` and
   `path_restart` (classes 2 and 3), `--control-seeds` seeds each, each until it has taken the
   target's budget in env steps; `controls/seedS-ENV-ARM-K.json` per run: its best score on
   the target's course, its env steps and their share of the budget. The runs go side by
   side as Ray tasks, one per CPU.
3. **`ued --seed S`**: ACCEL and DR as dcd runs them (its PPO, buffer 1,000), one run per
   class of seed S with its own training seed, each until it has taken the largest budget
   of the class's targets; the checkpoint with the best mean over the family's held-out
   levels (`best_checkpoint`) is scored on the class's targets and on every fixed course;
   `ued/seedS-classC-ARM.json` per run.
4. **`annecs --curriculum C --family F --seed S`**: the plan's ANNECS design, one arm and
   seed: POET or Enhanced POET on `terrain` or `terrain_cppn` at the reference's schedule
   (`ANNECS_STRUCTURE`), to `--iterations` (20,000; run again with more to go on toward
   60,000), then `annecs/C-F-seedS.json`: ANNECS and the reference's counter every 100
   iterations, the gains of the first and last thirds (`thirds`), and what the
   reproductions did (`reproductions`: the share at the admission cap, every child's fate).
5. **`analyse`**: `results.json` and `results.md` from those files, over the POET seeds
   whose every control run is done: per class and arm, the pooled solve rate with its 95%
   interval clustered by POET seed, and the seeds supporting the claim with their exact
   interval (the plan, section 1); each target's label and realised class, budget and runs;
   POET's solved fraction of the fixed courses per seed.
6. **`status`**: which seeds and runs are done.

The study page's analysis of ACCEL and DR on the fixed courses follows; `experiments/reproduce_poet.py` is the first round, which the study page shows until
this round's results replace it.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import poet
from envs import EnvParams
from envs.terrain import DIFFICULTY_CRITERIA, course_difficulty, realised_sizes
from poet.analysis import load_run
from poet.analysis.render import load_agents
from poet.evaluation import EvalRequest, InProcessEvaluator
from poet.parts import RunParts, read_parts
from poet.runtime import checkpoint

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
sys.path.insert(0, str(ROOT / "experiments"))  # the sibling scripts this study runs
import annecs_poet_vs_enhanced as arms  # noqa: E402
import reproduce_poet as round1  # noqa: E402
import study_stats  # noqa: E402
from difficulty_climb import climb  # noqa: E402

TARGETS_PER_CLASS = 3
CLASSES = (1, 2, 3)
FIXED_EPISODES = 5  # episodes per fixed course (the plan, section 1)
# the arms per class: class 1 gets `direct` only (the plan, section 3)
ARMS = {1: ("direct",), 2: ("direct", "path", "path_restart"), 3: ("direct", "path", "path_restart")}
QUICK_CLASSES = (0, 1, 2, 3)  # a smoke run's POET reaches class 0 only: its targets come from there
QUICK_ARMS = ("direct", "path", "path_restart")
PATH_STAGES = 10


def commit_of(root: Path = ROOT) -> dict:
    """The code this script runs from: its commit and whether tracked files differ from it."""

    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(root), *a], capture_output=True, text=True).stdout.strip()

    return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain", "--untracked-files=no"))}


def starts_of(run_dir: Path) -> list[dict]:
    """Each start and resume of a run: its iteration, code commit and time (`run.json`)."""
    return json.loads((run_dir / "run.json").read_text()).get("starts", [])


# --------------------------------------------------------------------------- part 1
def excess(realised: dict) -> float:
    """How far a course's realised obstacles go past the criteria they meet: the sum, over the
    criteria met, of value / threshold - 1 (the plan's 'summed excess', in each criterion's
    own scale)."""
    return float(sum(max(0.0, realised[name] / t - 1.0) for name, t in DIFFICULTY_CRITERIA.items()))


def solved_envs(run, family) -> list[dict]:
    """Every env the run solved, with its label class, its course's realised class and sizes,
    and the iteration it was solved at."""
    rows = []
    for r in run.envs[run.envs["solved_iteration"].notna()].itertuples():
        params = EnvParams.from_json(r.params_json)
        course = family.course(params, params.course_seed)
        sizes = realised_sizes(course)
        realised = {
            "pit_gap": sizes["widest_pit"],
            "stump_height": sizes["tallest_stump"],
            "roughness": float(params.values["roughness"]),
        }
        rows.append(
            {
                "env_id": r.env_id,
                "params": params.values,
                "course_seed": params.course_seed,
                "label_class": int(r.difficulty),
                "realised_class": course_difficulty(course, params.values["roughness"]),
                "realised": realised,
                "excess": excess(realised),
                "solved_iteration": int(r.solved_iteration),
            }
        )
    return rows


def pick_targets(envs: list[dict], classes: tuple[int, ...]) -> dict[str, dict]:
    """The plan's rule, per class: among solved envs whose course realises the class, the
    `TARGETS_PER_CLASS` with the largest excess, ties to the earlier solve; fewer when fewer."""
    picked = {}
    for c in classes:
        candidates = sorted(
            (e for e in envs if e["realised_class"] == c), key=lambda e: (-e["excess"], e["solved_iteration"])
        )
        chosen = candidates[:TARGETS_PER_CLASS]
        picked[str(c)] = {
            "candidates": len(candidates),
            "shortfall": TARGETS_PER_CLASS - len(chosen),
            "env_ids": [e["env_id"] for e in chosen],
        }
    return picked


def env_steps_through(run) -> np.ndarray:
    """Env steps the whole run took by the end of each iteration (every pair and phase)."""
    per = run.phases.groupby("iteration")["env_steps"].sum()
    full = per.reindex(range(int(per.index.max()) + 1), fill_value=0)
    return np.cumsum(full.to_numpy(dtype=np.int64))


def fixed_course_scores(parts: RunParts, snapshot: checkpoint.Snapshot, fixed: dict) -> dict:
    """The best of the snapshot's active and archived agents on every fixed course, per class
    (`FIXED_EPISODES` episodes, the run's episode cap), and which pair scored it."""
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    pop = snapshot.state.population
    agents = [*pop.active, *pop.archive]
    refs = [evaluator.put(a.theta) for a in agents]
    max_steps = parts.cfg.evaluation.max_steps
    out = {}
    for c, entry in fixed["classes"].items():
        courses = [EnvParams.create("terrain", k["params"], k["course_seed"]) for k in entry["courses"]]
        requests = [EvalRequest(ref, env, FIXED_EPISODES, 0, max_steps) for env in courses for ref in refs]
        means = np.array([r.mean for r in evaluator.evaluate(requests)]).reshape(len(courses), len(agents))
        out[c] = {
            "best": [float(v) for v in means.max(axis=1)],
            "by_pair": [agents[i].pair_id for i in means.argmax(axis=1)],
        }
    evaluator.close()
    return {"agents": len(agents), "episodes": FIXED_EPISODES, "classes": out}


def poet_part(seed: int, args: argparse.Namespace) -> Path:
    """Run or resume POET at `seed`, then write its summary (the module docstring, part 1)."""
    t0 = time.perf_counter()
    entry = arms.run_arm("poet", seed, args.iterations, args.out, args.quick)
    run_dir = Path(entry["run_dir"])
    run = load_run(run_dir)
    parts, snapshot = load_agents(run_dir)
    threshold = float(run.config["solved_threshold"])
    envs = solved_envs(run, parts.family)
    by_id = {e["env_id"]: e for e in envs}
    through = env_steps_through(run)
    targets = []
    picked = pick_targets(envs, QUICK_CLASSES if args.quick else CLASSES)
    for c, choice in picked.items():
        for env_id in choice["env_ids"]:
            e = by_id[env_id]
            targets.append(
                {
                    **e,
                    "class": int(c),
                    "arms": list(QUICK_ARMS if args.quick else ARMS[int(c)]),
                    "budget_env_steps": int(through[e["solved_iteration"]]),
                    "lineage_steps": round1.lineage_steps(run, env_id),
                    "poet_score": round1.poet_best(run, env_id),
                }
            )
    fixed = json.loads(args.fixed.read_text())
    summary = {
        "command": f"python experiments/reproduce_poet_round2.py poet --seed {seed}"
        + (" --quick" if args.quick else ""),
        "seed": seed,
        "iterations": entry["iterations"],
        "structure": arms.QUICK if args.quick else arms.STRUCTURE,
        "solved_threshold": threshold,
        "starts": starts_of(run_dir),
        "summary_code": commit_of(),
        "seconds": round1.phase_seconds(run),
        "env_steps": int(through[-1]),
        "classes": climb(run_dir, every=max(1, args.iterations // 20))["classes"],
        "solved_envs": envs,
        "targets_rule": picked,
        "targets": targets,
        "fixed_courses": {
            "file": str(args.fixed.relative_to(ROOT)) if args.fixed.is_relative_to(ROOT) else str(args.fixed),
            **fixed_course_scores(parts, snapshot, fixed),
        },
        "summary_seconds": round(time.perf_counter() - t0 - entry["wall_seconds_this_call"], 1),
    }
    path = args.results / "poet" / f"seed{seed}.json"
    round1.write_json(path, summary)
    shortfall = {c: p["shortfall"] for c, p in picked.items() if p["shortfall"]}
    print(
        f"POET seed {seed}: {len(envs)} solved envs, {len(targets)} targets"
        + (f" (short by class: {shortfall})" if shortfall else "")
        + f"; {path}",
        flush=True,
    )
    return path


# --------------------------------------------------------------------------- part 2
def control_overrides(arm: str, target: EnvParams, budget: int, seed: int, quick: bool) -> list[str]:
    """The config of one control run: POET's trainer settings, a fresh agent, its curriculum."""
    over = [*(round1.QUICK_CONTROL if quick else []), *round1.CONTROL_WHERE, f"seed={100 + seed}"]
    if arm == "direct":
        return [*over, "curriculum=direct", f"env.start={json.dumps(target.to_dict())}"]
    options = {
        "target": target.to_dict(),
        "stages": PATH_STAGES,
        "env_steps": budget,
        "restart_trainer": arm == "path_restart",
    }
    return [*over, "curriculum=path", f"curriculum_options={json.dumps(options)}"]


def first_stretch(budget: int) -> int:
    """Iterations a control surely takes within its budget: every rollout and evaluation
    episode of an ES step at the episode cap (`match_env_steps` then goes on by the run's own
    rate)."""
    return max(1, budget // _es_step_env_steps())


@functools.cache
def _es_step_env_steps() -> int:
    """Env steps of one ES step of the study's config with every episode at its cap."""
    cfg = poet.load_config(round1.CONFIG)
    population = int(cfg.trainer.section("es")["population"])
    return (population + cfg.evaluation.eval_episodes) * cfg.evaluation.max_steps


def control_run(out: Path, overrides: list[str], budget: int, first: int, record: dict, path: Path) -> float:
    """One control run until it has taken `budget` env steps, then its record at `path`; the
    seconds it ran. (A Ray task: the record is written by the run's own task, so a run that
    finished is kept when the rest of the call is interrupted.)"""
    seconds = round1.match_env_steps(out, overrides, budget, first)
    run = load_run(out)
    steps = round1.env_steps(run)
    score = round1.best_recorded(run, record["env_id"])
    record = {
        **record,
        "run_dir": str(out),
        "iterations": int(run.phases["iteration"].max()) + 1,
        "env_steps": steps,
        "share_of_budget": steps / budget,
        "score": score,
        "solved": bool(score is not None and score >= record["solved_threshold"]),
        "sigma_floor_iteration": round1.sigma_floor_iteration(run),
        "seconds": round1.phase_seconds(run),
        "starts": starts_of(out),
    }
    round1.write_json(path, record)
    return seconds


def controls_part(seed: int, args: argparse.Namespace) -> None:
    """Every control run of POET seed `seed` that has no record yet (part 2)."""
    summary_path = args.results / "poet" / f"seed{seed}.json"
    if not summary_path.exists():
        sys.exit(f"reproduce_poet_round2: no {summary_path}; run the `poet --seed {seed}` part first")
    summary = json.loads(summary_path.read_text())
    calls = []
    for t in summary["targets"]:
        target = EnvParams.create("terrain", t["params"], t["course_seed"])
        if target.id != t["env_id"]:
            raise RuntimeError(f"target {t['env_id']}: its params and course give env {target.id}")
        budget = t["budget_env_steps"]
        for arm in t["arms"]:
            for k in range(args.control_seeds):
                name = f"seed{seed}-{t['env_id'][:8]}-{arm}-{k}"
                path = args.results / "controls" / f"{name}.json"
                if path.exists():
                    continue
                record = {
                    "poet_seed": seed,
                    "env_id": t["env_id"],
                    "class": t["class"],
                    "arm": arm,
                    "control_seed": k,
                    "budget_env_steps": budget,
                    "solved_threshold": summary["solved_threshold"],
                }
                over = control_overrides(arm, target, budget, k, args.quick)
                calls.append((args.out / "controls" / name, over, budget, first_stretch(budget), record, path))
    print(f"controls of POET seed {seed}: {len(calls)} runs to go", flush=True)
    if calls:
        round1.run_all(calls, f"controls of seed {seed}", run=control_run, cost_at=2)


# ------------------------------------------------------------------ part 3: ACCEL and DR
UED_ARMS = ("accel", "dr")
CHECKPOINTS_PER_RUN = 100  # held-out scores and checkpoints at as many points of a run


def ued_overrides(arm: str, seed: int, every: int, quick: bool) -> list[str]:
    """An ACCEL or DR run as dcd runs it (the curriculum's defaults: dcd's PPO, buffer 1,000,
    16 levels a cycle) on the study's env and episode cap, scored on the family's held-out
    levels and checkpointed at the same iterations, every checkpoint kept."""
    over = [
        f"curriculum={arm}",
        f"seed={seed}",
        "env.family=terrain",
        "evaluation.max_steps=400",  # the study's episode cap, every method's (dcd's bipedal: 2,000)
        f"evaluation.test_every={every}",
        f"checkpoint.every={every}",
        "checkpoint.keep=1000000",
        "evaluation.backend=inprocess",
        "progress=false",
    ]
    if quick:
        over += ["env.options={course_length: 20.0, max_episode_steps: 150}", "trainer.ppo.n_steps=32"]
    return over


def best_checkpoint(run_dir: Path, every: int) -> tuple[int, float]:
    """The checkpoint whose agent had the best mean over the held-out levels (ties: the
    earlier), chosen before any target is scored; its iteration and that mean."""
    heldout = load_run(run_dir).heldout
    means = heldout.groupby("iteration")["score"].mean()
    iteration = int(means.idxmax())  # idxmax: the first of equal maxima
    return iteration + 1, float(means.loc[iteration])  # held-out after iteration i: checkpoint i + 1


def ued_scores(run_dir: Path, at: int, courses: list[EnvParams]) -> list[float]:
    """The agent of the run's checkpoint at iteration `at` on each course, `FIXED_EPISODES` each."""
    parts = read_parts(poet.load_config(run_dir / "config.yaml"))
    snapshot = checkpoint.load(run_dir / "checkpoints" / f"{checkpoint.PREFIX}{at:09d}")
    (agent,) = snapshot.state.population.active
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    ref = evaluator.put(agent.theta)
    max_steps = parts.cfg.evaluation.max_steps
    results = evaluator.evaluate([EvalRequest(ref, env, FIXED_EPISODES, 0, max_steps) for env in courses])
    evaluator.close()
    return [float(r.mean) for r in results]


def ued_run(out: Path, overrides: list[str], budget: int, first: int, record: dict, path: Path, every: int) -> float:
    """One ACCEL or DR run until it has taken `budget` env steps; then its best checkpoint on
    its class's targets and on every fixed course, written to `path` (a Ray task, as
    `control_run`)."""
    seconds = round1.match_env_steps(out, overrides, budget, first, config={})
    run = load_run(out)
    at, heldout_mean = best_checkpoint(out, every)
    targets = [EnvParams.create("terrain", t["params"], t["course_seed"]) for t in record["targets"]]
    fixed = json.loads((ROOT / record["fixed_file"]).read_text())["classes"]
    courses = {
        c: [EnvParams.create("terrain", k["params"], k["course_seed"]) for k in e["courses"]] for c, e in fixed.items()
    }
    scores = ued_scores(out, at, [*targets, *(env for c in courses for env in courses[c])])
    target_scores, fixed_scores = scores[: len(targets)], iter(scores[len(targets) :])
    steps = round1.env_steps(run)
    record = {
        **record,
        "run_dir": str(out),
        "iterations": int(run.phases["iteration"].max()) + 1,
        "env_steps": steps,
        "share_of_budget": steps / budget,
        "chosen_checkpoint": at,
        "heldout_mean_at_choice": heldout_mean,
        "target_scores": target_scores,
        "targets_solved": sum(x >= record["solved_threshold"] for x in target_scores),
        "fixed_courses": {c: [next(fixed_scores) for _ in courses[c]] for c in courses},
        "seconds": round1.phase_seconds(run),
        "starts": starts_of(out),
    }
    round1.write_json(path, record)
    return seconds


def ued_part(seed: int, args: argparse.Namespace) -> None:
    """ACCEL and DR, one run per class of POET seed `seed` (its own training seed), each for
    the largest budget among the class's targets, the env steps a compute-matched `direct`
    run of the class takes (the plan, section 4)."""
    summary = json.loads((args.results / "poet" / f"seed{seed}.json").read_text())
    calls = []
    for c in sorted({t["class"] for t in summary["targets"]}):
        mine = [t for t in summary["targets"] if t["class"] == c]
        budget = max(t["budget_env_steps"] for t in mine)
        for arm in UED_ARMS:
            name = f"seed{seed}-class{c}-{arm}"
            path = args.results / "ued" / f"{name}.json"
            if path.exists():
                continue
            cycle = 16 * (32 if args.quick else 256)  # dcd's 16 levels x 256 steps a cycle
            every = max(1, budget // cycle // CHECKPOINTS_PER_RUN)
            record = {
                "poet_seed": seed,
                "class": c,
                "arm": arm,
                "training_seed": 1000 + 10 * seed + c,
                "budget_env_steps": budget,
                "solved_threshold": summary["solved_threshold"],
                "targets": [{k: t[k] for k in ("env_id", "params", "course_seed")} for t in mine],
                "fixed_file": str(args.fixed.relative_to(ROOT) if args.fixed.is_relative_to(ROOT) else args.fixed),
                "checkpoint_every": every,
            }
            over = ued_overrides(arm, record["training_seed"], every, args.quick)
            first = max(1, budget // (2 * cycle))
            calls.append((args.out / "ued" / name, over, budget, first, record, path, every))
    print(f"ACCEL and DR of POET seed {seed}: {len(calls)} runs to go", flush=True)
    if calls:
        round1.run_all(calls, f"ACCEL and DR of seed {seed}", run=ued_run, cost_at=2)


# --------------------------------------------------------------------------- part 4
# The plan's section 5: the reference's schedule, transfers as in the first round
ANNECS_STRUCTURE = [
    "reproduction.every=150",
    "reproduction.max_admitted=1",
    "reproduction.capacity=40",
    "transfer.every=25",
]
ANNECS_ARMS = ("poet", "enhanced_poet")
ANNECS_FAMILIES = ("terrain", "terrain_cppn")
ANNECS_EVERY = 100  # the curves' step, in iterations


def reproductions(run, max_admitted: int, mc: tuple[float, float]) -> dict:
    """What the run's reproduction phases did: how many, the share that admitted as many
    children as allowed (at the cap), and what became of every child."""
    ev = run.events
    phases = ev[ev["kind"] == "reproduce"]["iteration"].astype(int)
    admitted = ev[ev["kind"] == "admitted"].groupby("iteration").size()
    at_cap = int(sum(admitted.get(i, 0) >= max_admitted for i in phases))
    fate = {"admitted": 0, "below_mc": 0, "above_mc": 0, "refused_at_transfer": 0, "not_considered": 0}
    for d in ev[ev["kind"] == "child"]["detail"]:
        child = json.loads(d)
        if child["admitted_as"]:
            fate["admitted"] += 1
        elif not child["passed_mc"]:
            fate["below_mc" if child["mc_score"] < mc[0] else "above_mc"] += 1
        elif child["transfer_score"] is not None and not math.isnan(child["transfer_score"]):
            fate["refused_at_transfer"] += 1  # the best transferred agent missed the MC
        else:
            fate["not_considered"] += 1  # passed, but the phase had admitted its maximum
    return {"phases": len(phases), "at_cap": at_cap, "share_at_cap": at_cap / max(1, len(phases)), "children": fate}


def thirds(curve: list[int]) -> dict:
    """The plan's statistic: ANNECS gained in the first and the last third of the run, and
    whether the last third's gain is under a quarter of the first's (a plateau, in one run)."""
    n = len(curve)
    at = lambda i: curve[i - 1] if i > 0 else 0  # noqa: E731 (ANNECS after i iterations)
    first, last = at(n // 3), at(n) - at(n - n // 3)
    return {"first_third": first, "last_third": last, "levels_off": bool(last < first / 4)}


def annecs_part(curriculum: str, family: str, seed: int, args: argparse.Namespace) -> Path:
    """Run or resume one ANNECS arm at `seed` to `--iterations`, then its file in `annecs/`."""
    run_dir = args.out / "annecs" / f"{curriculum}-{family}-seed{seed}"
    if (run_dir / "checkpoints").is_dir():
        poet.resume(run_dir, iterations=args.iterations, progress=not args.quick)
    else:
        structure = [*arms.QUICK, *ANNECS_STRUCTURE[1:3]] if args.quick else ANNECS_STRUCTURE
        sets = [f"seed={seed}", f"iterations={args.iterations}", f"curriculum={curriculum}", f"env.family={family}"]
        poet.run(round1.CONFIG, out=run_dir, overrides=[*sets, *structure], progress=not args.quick)
    run = load_run(run_dir)
    rp = run.config["reproduction"]
    curve = [int(v) for v in run.annecs.to_numpy()]
    reference = [int(v) for v in run.annecs_reference.to_numpy()]
    every = 1 if args.quick else ANNECS_EVERY
    summary = {
        "command": f"python experiments/reproduce_poet_round2.py annecs --curriculum {curriculum} --family {family} "
        f"--seed {seed} --iterations {args.iterations}" + (" --quick" if args.quick else ""),
        "curriculum": curriculum,
        "family": family,
        "seed": seed,
        "iterations": len(curve),
        "structure": [*arms.QUICK, *ANNECS_STRUCTURE[1:3]] if args.quick else ANNECS_STRUCTURE,
        "starts": starts_of(run_dir),
        "summary_code": commit_of(),
        "seconds": round1.phase_seconds(run),
        "env_steps": round1.env_steps(run),
        "envs_created": int(len(run.envs)),
        "annecs": curve[-1] if curve else 0,
        "annecs_reference": reference[-1] if reference else 0,
        "curve_every": every,
        "annecs_curve": curve[every - 1 :: every],
        "annecs_reference_curve": reference[every - 1 :: every],
        "thirds": thirds(curve),
        "reproduction": reproductions(run, int(rp["max_admitted"]), (float(rp["mc_lower"]), float(rp["mc_upper"]))),
    }
    path = args.results / "annecs" / f"{curriculum}-{family}-seed{seed}.json"
    round1.write_json(path, summary)
    r = summary["reproduction"]
    print(
        f"{curriculum} on {family}, seed {seed}: ANNECS {summary['annecs']} at {summary['iterations']:,}; "
        f"{r['share_at_cap']:.0%} of {r['phases']} reproductions at the cap; {path}",
        flush=True,
    )
    return path


# --------------------------------------------------------------------------- part 5
def load_parts(results: Path) -> tuple[list[dict], list[dict]]:
    """The POET seeds' summaries, by seed, and every control run's record."""
    seeds = sorted((json.loads(p.read_text()) for p in (results / "poet").glob("seed*.json")), key=lambda s: s["seed"])
    runs = [json.loads(p.read_text()) for p in sorted((results / "controls").glob("*.json"))]
    return seeds, runs


def complete_seeds(seeds: list[dict], runs: list[dict], control_seeds: int) -> list[int]:
    """The POET seeds whose every control run is finished (the plan: the analysis uses these)."""
    done = {(r["poet_seed"], r["env_id"], r["arm"], r["control_seed"]) for r in runs}
    return [
        s["seed"]
        for s in seeds
        if all(
            (s["seed"], t["env_id"], arm, k) in done
            for t in s["targets"]
            for arm in t["arms"]
            for k in range(control_seeds)
        )
    ]


def estimand(seeds: list[dict], runs: list[dict], complete: list[int], classes: tuple[int, ...]) -> list[dict]:
    """The plan's primary statistics per class and arm, over the complete seeds: the pooled
    solve rate with its interval clustered by seed, and the seeds supporting the claim (the arm
    solves under half its runs there) with the exact interval of that count."""
    rows = []
    targets = {(s["seed"], t["env_id"]): t for s in seeds for t in s["targets"]}
    for c in classes:
        for arm in dict.fromkeys(a for s in seeds for t in s["targets"] if t["class"] == c for a in t["arms"]):
            per_seed = []
            for seed in complete:
                mine = [
                    r
                    for r in runs
                    if r["poet_seed"] == seed and r["arm"] == arm and targets[(seed, r["env_id"])]["class"] == c
                ]
                if mine:
                    per_seed.append({"seed": seed, "runs": len(mine), "solved": sum(r["solved"] for r in mine)})
            solved, total = sum(x["solved"] for x in per_seed), sum(x["runs"] for x in per_seed)
            supporting = sum(x["solved"] < x["runs"] / 2 for x in per_seed)
            shares = [r["share_of_budget"] for r in runs if r["arm"] == arm and r["poet_seed"] in complete]
            rows.append(
                {
                    "class": c,
                    "arm": arm,
                    "seeds": len(per_seed),
                    "per_seed": per_seed,
                    "runs": total,
                    "solved": solved,
                    "rate": solved / total if total else None,
                    "rate_ci95_by_seed": list(
                        study_stats.cluster_bootstrap_rate(
                            [x["solved"] for x in per_seed], [x["runs"] for x in per_seed]
                        )
                    ),
                    "seeds_supporting": supporting,
                    "supporting_ci95_exact": list(study_stats.clopper_pearson(supporting, len(per_seed)))
                    if per_seed
                    else None,
                    "share_of_budget_median": float(np.median(shares)) if shares else None,
                }
            )
    return study_stats.json_safe(rows)


def fixed_course_fractions(seeds: list[dict], threshold: float) -> dict:
    """Per class, the fraction of the fixed courses POET's population solved, per seed."""
    return {
        c: {
            str(s["seed"]): float(np.mean([b >= threshold for b in s["fixed_courses"]["classes"][c]["best"]]))
            for s in seeds
        }
        for c in (seeds[0]["fixed_courses"]["classes"] if seeds else {})
    }


def fixed_course_tests(seeds: list[dict], results: Path, threshold: float) -> list[dict]:
    """The plan's selection-free test, per class and UED arm: per POET seed, the fraction of
    the class's fixed courses POET's population solved minus the fraction the paired ACCEL or
    DR run solved (its run for that seed and class); the exact one-sided sign-flip p over the
    seeds, Holm-adjusted over every test here (3 classes x 2 arms)."""
    poet_fraction = fixed_course_fractions(seeds, threshold)
    ued = [json.loads(p.read_text()) for p in sorted((results / "ued").glob("*.json"))]
    tests = []
    for c in CLASSES:
        for arm in UED_ARMS:
            pairs = [
                (
                    r["poet_seed"],
                    poet_fraction[str(c)][str(r["poet_seed"])],
                    float(np.mean([x >= threshold for x in r["fixed_courses"][str(c)]])),
                )
                for r in ued
                if r["arm"] == arm and r["class"] == c and str(r["poet_seed"]) in poet_fraction.get(str(c), {})
            ]
            differences = [a - b for _, a, b in pairs]
            tests.append(
                {
                    "class": c,
                    "arm": arm,
                    "seeds": [seed for seed, _, _ in pairs],
                    "poet": [a for _, a, _ in pairs],
                    "method": [b for _, _, b in pairs],
                    "mean_difference": float(np.mean(differences)) if differences else math.nan,
                    "p": study_stats.sign_flip_test(differences),
                    "min_p": study_stats.min_attainable_p(len(differences)),
                }
            )
    for t, adjusted in zip(tests, study_stats.holm([t["p"] for t in tests])):
        t["p_holm"] = adjusted
    return study_stats.json_safe(tests)


def annecs_arms(results: Path) -> list[dict]:
    """Per ANNECS arm (algorithm and family): its seeds' ANNECS, gains by third and share of
    reproductions at the cap, and whether it levels off by the plan's rule (in every seed)."""
    runs = [json.loads(p.read_text()) for p in sorted((results / "annecs").glob("*.json"))]
    out = []
    for curriculum in ANNECS_ARMS:
        for family in ANNECS_FAMILIES:
            mine = sorted(
                (r for r in runs if (r["curriculum"], r["family"]) == (curriculum, family)), key=lambda r: r["seed"]
            )
            if mine:
                out.append(
                    {
                        "curriculum": curriculum,
                        "family": family,
                        "seeds": [
                            {k: r[k] for k in ("seed", "iterations", "annecs", "annecs_reference", "thirds", "seconds")}
                            | {"share_at_cap": r["reproduction"]["share_at_cap"]}
                            for r in mine
                        ],
                        "levels_off": all(r["thirds"]["levels_off"] for r in mine),
                    }
                )
    return out


def analyse(args: argparse.Namespace) -> None:
    """`results.json` and `results.md` from every file the parts wrote (the plan's analysis)."""
    seeds, runs = load_parts(args.results)
    if not seeds:
        sys.exit(f"reproduce_poet_round2: no POET seed in {args.results / 'poet'}; run the `poet` part first")
    complete = complete_seeds(seeds, runs, args.control_seeds)
    threshold = seeds[0]["solved_threshold"]
    result = {
        "command": "python experiments/reproduce_poet_round2.py analyse" + (" --quick" if args.quick else ""),
        "code": commit_of(),
        "plan": "docs/study-plan.md",
        "control_seeds": args.control_seeds,
        "solved_threshold": threshold,
        "poet_seeds": [s["seed"] for s in seeds],
        "complete_seeds": complete,
        "poet": [
            {k: s[k] for k in ("seed", "iterations", "seconds", "env_steps", "starts", "classes", "targets_rule")}
            for s in seeds
        ],
        "targets": [
            {
                **{k: t[k] for k in ("env_id", "class", "label_class", "realised_class", "realised", "excess")},
                **{k: t[k] for k in ("solved_iteration", "budget_env_steps", "lineage_steps", "poet_score")},
                "poet_seed": s["seed"],
                "runs": {
                    arm: sorted(
                        (
                            r
                            for r in runs
                            if r["poet_seed"] == s["seed"] and r["env_id"] == t["env_id"] and r["arm"] == arm
                        ),
                        key=lambda r: r["control_seed"],
                    )
                    for arm in t["arms"]
                },
            }
            for s in seeds
            for t in s["targets"]
        ],
        "estimand": estimand(seeds, runs, complete, QUICK_CLASSES if args.quick else CLASSES),
        "fixed_courses": fixed_course_fractions(seeds, threshold),
        "fixed_course_tests": fixed_course_tests(seeds, args.results, threshold),
        "annecs": annecs_arms(args.results),
    }
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "results.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.results / "results.md").write_text(tables(result))
    print((args.results / "results.md").read_text())


def tables(result: dict) -> str:
    """Markdown: the estimand per class and arm, the targets with their budgets and runs, and
    POET's solved fraction of the fixed courses per seed."""
    md = round1.markdown
    lines = [f"Complete seeds: {len(result['complete_seeds'])} of {len(result['poet_seeds'])} POET seeds.", ""]
    lines += md(
        [
            "class",
            "arm",
            "seeds",
            "runs solved",
            "rate [95% CI, by seed]",
            "seeds supporting [exact 95% CI]",
            "share of budget (median)",
        ],
        [
            [
                str(e["class"]),
                e["arm"],
                str(e["seeds"]),
                f"{e['solved']}/{e['runs']}",
                "n/a"
                if e["rate"] is None
                else f"{e['rate']:.2f} [{e['rate_ci95_by_seed'][0]:.2f}, {e['rate_ci95_by_seed'][1]:.2f}]",
                "n/a"
                if e["supporting_ci95_exact"] is None
                else f"{e['seeds_supporting']}/{e['seeds']} [{e['supporting_ci95_exact'][0]:.2f}, {e['supporting_ci95_exact'][1]:.2f}]",
                round1.number(e["share_of_budget_median"], ".2f"),
            ]
            for e in result["estimand"]
        ],
    )
    rows = []
    for t in result["targets"]:
        cells = [
            f"{best:.0f} ({sum(r['solved'] for r in rs)}/{len(rs)})"
            if (best := max((r["score"] for r in rs), default=None)) is not None
            else "n/a"
            for rs in t["runs"].values()
        ]
        rows.append(
            [
                str(t["poet_seed"]),
                f"{t['class']} (label {t['label_class']})",
                t["env_id"][:8],
                f"pit {t['realised']['pit_gap']:.2f}, stump {t['realised']['stump_height']:.2f}, rough {t['realised']['roughness']:.2f}",
                f"{t['solved_iteration']:,}",
                f"{t['budget_env_steps'] / 1e6:,.1f} M",
                number_or(t["poet_score"]),
                "; ".join(f"{arm}: {cell}" for arm, cell in zip(t["runs"], cells)),
            ]
        )
    lines += [""] + md(
        [
            "POET seed",
            "realised class",
            "target",
            "realised obstacles",
            "solved at",
            "budget (env steps)",
            "POET",
            "controls: best (solved)",
        ],
        rows,
    )
    fixed = result["fixed_courses"]
    lines += [""] + md(
        ["POET seed", *(f"class {c}: fixed courses solved" for c in fixed)],
        [[str(seed), *(f"{fixed[c][str(seed)]:.2f}" for c in fixed)] for seed in result["poet_seeds"]],
    )
    lines += [""] + md(
        [
            "class",
            "method",
            "seeds",
            "POET - method, fixed courses solved (mean)",
            "p (sign-flip, unit: POET seed)",
            "smallest p possible",
            "Holm p",
        ],
        [
            [str(t["class"]), t["arm"], str(len(t["seeds"]))]
            + [round1.number(t[k], ".3g") for k in ("mean_difference", "p", "min_p", "p_holm")]
            for t in result["fixed_course_tests"]
        ],
    )
    lines += [""] + md(
        [
            "arm",
            "family",
            "seed",
            "iterations",
            "ANNECS (reference's counter)",
            "gain: first third / last third",
            "reproductions at the cap",
        ],
        [
            [
                a["curriculum"],
                a["family"],
                str(r["seed"]),
                f"{r['iterations']:,}",
                f"{r['annecs']} ({r['annecs_reference']})",
            ]
            + [f"{r['thirds']['first_third']} / {r['thirds']['last_third']}", f"{r['share_at_cap']:.0%}"]
            for a in result["annecs"]
            for r in a["seeds"]
        ],
    )
    return "\n".join(lines) + "\n"


def number_or(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}"


def status(args: argparse.Namespace) -> None:
    """Which POET seeds and control runs have their files."""
    for path in sorted((args.results / "poet").glob("seed*.json")):
        s = json.loads(path.read_text())
        runs = list((args.results / "controls").glob(f"seed{s['seed']}-*.json"))
        want = sum(len(t["arms"]) * args.control_seeds for t in s["targets"])
        print(f"POET seed {s['seed']}: {len(s['targets'])} targets; controls {len(runs)}/{want} runs")


# ------------------------------------------------------------------------------ main
def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("part", choices=["poet", "controls", "ued", "annecs", "analyse", "status"])
    parser.add_argument("--seed", type=int, default=0, help="the POET seed (annecs: the arm's seed)")
    parser.add_argument("--curriculum", choices=ANNECS_ARMS, default="poet", help="annecs: the arm's algorithm")
    parser.add_argument("--family", choices=ANNECS_FAMILIES, default="terrain", help="annecs: the arm's family")
    parser.add_argument("--iterations", type=int, default=None, help="default: poet 10,000, annecs 20,000")
    parser.add_argument("--control-seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None, help="run directories (default runs/round2)")
    parser.add_argument("--results", type=Path, default=None, help=f"default {RESULTS / 'reproduce_poet' / 'round2'}")
    parser.add_argument("--fixed", type=Path, default=RESULTS / "reproduce_poet" / "fixed_courses.json")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process, never the results")
    args = parser.parse_args()
    if args.quick:
        if args.results is not None and args.results.resolve().is_relative_to(RESULTS):
            parser.error("--quick never writes into experiments/results/; give --results elsewhere or none")
        args.results = args.results or Path(tempfile.mkdtemp(prefix="reproduce_poet_round2-quick-")) / "results"
        args.out = args.out or args.results.parent / "runs"
        args.iterations, args.control_seeds = 24 if args.part == "annecs" else 12, 1
    args.iterations = args.iterations or (20_000 if args.part == "annecs" else 10_000)
    args.out = args.out or ROOT / "runs" / "round2"
    args.results = args.results or RESULTS / "reproduce_poet" / "round2"
    return args


def main() -> None:
    args = parse_args()
    if args.part in ("status", "analyse"):
        return status(args) if args.part == "status" else analyse(args)
    from poet.runtime.ray_session import ensure_ray

    ensure_ray(None)  # one Ray for the part: POET's pool (--quick: in-process), the controls as tasks
    # SIGTERM ends the part as Ctrl-C does (the runs in progress checkpoint), not as Ray's handler would
    signal.signal(signal.SIGTERM, round1._interrupt)
    if args.part == "poet":
        poet_part(args.seed, args)
    elif args.part == "annecs":
        annecs_part(args.curriculum, args.family, args.seed, args)
    elif args.part == "ued":
        ued_part(args.seed, args)
    else:
        controls_part(args.seed, args)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, poet.RunInterrupted):  # the runs in progress saved their checkpoints
        print("reproduce_poet_round2: interrupted; run the same command again to resume", file=sys.stderr)
        sys.exit(130)
