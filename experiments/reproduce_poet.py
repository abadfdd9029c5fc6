"""POET's claim at the paper's difficulty classes: what POET solves per class, what its controls
solve there, and Enhanced POET's ANNECS against the original's.

    python experiments/reproduce_poet.py [--iterations 2500] [--seeds 2] [--control-seeds 3]
                                         [--targets 3] [--out runs/reproduce]
                                         [--results experiments/results/reproduce_poet] [--quick]

1. Original POET on `terrain` and Enhanced POET on `terrain_cppn` run `--iterations` with
   the paper's structure where it fits (`experiments/annecs_poet_vs_enhanced.py`: capacity
   20, a transfer and a reproduction every 25 iterations), seeds 0 .. `--seeds` - 1. POET's
   seed-0 run is the one the controls are measured against.
2. Its solved envs are classed as the POET paper classes them (`family.difficulty`: how many
   of max stump height >= 2.4, max pit gap >= 6.0, roughness >= 4.5 a course meets). Of each
   class reached, up to `--targets` solved envs, hardest first (the sum over the criteria of
   each value over its threshold), are the targets.
3. The controls, `--control-seeds` seeds each, with the same trainer settings as POET's:
   - `direct`: ES from a fresh agent on the target's own course;
   - `path`: the direct-path curriculum, 10 equal stages from the start course to the target;
   both with twice the trainer steps of the target's POET lineage (`lineage_steps`);
   - `accel` and `dr`, which never see the target: one run per class and seed, until it has
     taken the env steps of the class's longest direct run, scored on each of its targets.
   A run's score on a target: for `direct` and `path` the best score it recorded on the
   target's course; for `accel` and `dr` their final agents' best on it. POET's: the best
   score its pair recorded on the target (>= the solved threshold, as it is solved).
4. Per class and control: the runs that reached the solved threshold, their best scores and
   a Mann-Whitney U test of POET's scores on the class's targets against the control's
   (one-sided: POET higher).

Every run is resumable: rerunning the command resumes each run directory where it stopped (a
finished one costs nothing). It writes `results.json` (every number), `results.md` (the
tables), `scores.png`, `climb.png` and `annecs.png` in `--results`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from scipy.stats import mannwhitneyu

import poet
from envs import EnvParams
from envs.terrain import DIFFICULTY_CLASSES, DIFFICULTY_CRITERIA
from poet.analysis import Run, load_run

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))  # the sibling scripts this study runs
import annecs_poet_vs_enhanced as arms  # noqa: E402
from difficulty_climb import climb  # noqa: E402

CONFIG = arms.CONFIG
CONTROLS = ("direct", "path", "accel", "dr")
# ACCEL and DR run this many iterations first, then as many more as their own rate of env
# steps says they need to match the direct runs' (a cycle of 16 levels costs far more env
# steps than an ES step on one env, so a longer first stretch would overshoot)
FIRST_STRETCH = 200
BUDGET_FACTOR = (
    2  # controls get twice the lineage's trainer steps; the paper's own budget is unverified (docs/study.md)
)
QUICK_CONTROL = [
    "env.options={course_length: 20.0, max_episode_steps: 150}",
    "trainer.es.population=8",
    "evaluation.backend=inprocess",
    "evaluation.eval_episodes=1",
]


# ------------------------------------------------------------------------------ runs
def run_or_resume(out: Path, overrides: list[str], iterations: int) -> Path:
    """Run `CONFIG` with `overrides` into `out`, or resume it there to `iterations`."""
    if (out / "checkpoints").is_dir():
        poet.resume(out, iterations=iterations, progress=False)
    else:
        poet.run(CONFIG, out=out, overrides=[*overrides, f"iterations={iterations}"], progress=False)
    return out


def env_steps(run: Run, before: int | None = None) -> int:
    """Env steps a run took, every phase (only in its iterations before `before`, if given)."""
    phases = run.phases
    return int(
        phases["env_steps"].sum() if before is None else phases.loc[phases["iteration"] < before, "env_steps"].sum()
    )


def match_env_steps(out: Path, overrides: list[str], goal: int, first: int) -> int:
    """Run `out` for `first` iterations, then resume it further until it has taken at least
    `goal` env steps, each time to the iteration its own rate so far says; the iterations it ran.

    Each target follows from the run's steps at the one before, so a study interrupted and run
    again reaches the same iteration (a resumed run equals one run straight to it)."""
    target = first
    while True:
        run_or_resume(out, overrides, target)
        steps = env_steps(load_run(out), before=target)
        if steps >= goal:
            return target
        target = max(target + 1, math.ceil(target * goal / max(steps, 1)))


def control_overrides(name: str, target: EnvParams, seed: int, quick: bool) -> list[str]:
    """The config of one control run: POET's trainer settings, a fresh agent, its curriculum."""
    over = [*(QUICK_CONTROL if quick else []), f"curriculum={name}", f"seed={100 + seed}"]
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


def final_score(run_dir: Path, target: EnvParams) -> float:
    """The best final agent of a run, scored on the target's own course (the run's evaluation settings)."""
    from poet.analysis.render import load_agents
    from poet.evaluation import EvalRequest, InProcessEvaluator

    parts, snapshot = load_agents(run_dir)
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    agents = snapshot.state.population.active
    requests = [
        EvalRequest(
            evaluator.put(a.theta),
            target,
            parts.cfg.evaluation.eval_episodes,
            0,
            parts.cfg.evaluation.max_steps,
            tag=a.pair_id,
        )
        for a in agents
    ]
    return float(max(r.mean for r in evaluator.evaluate(requests)))


def score_of(name: str, run_dir: Path, run: Run, target: EnvParams, target_id: str) -> float:
    """A control run's score on the target (see the module docstring); `run` is its loaded records."""
    if name in ("direct", "path"):
        best = best_recorded(run, target_id)
        if best is not None:
            return best
    return final_score(run_dir, target)


def rank_test(poet_scores: list[float], control_scores: list[float]) -> dict:
    """Mann-Whitney U of POET's scores against a control's, one-sided (POET higher)."""
    if not poet_scores or not control_scores:
        return {"u": None, "p": None}
    test = mannwhitneyu(poet_scores, control_scores, alternative="greater")
    return {"u": float(test.statistic), "p": float(test.pvalue)}


# ------------------------------------------------------------------------------ main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2500)
    parser.add_argument("--seeds", type=int, default=2, help="seeds of each POET arm (the ANNECS figure)")
    parser.add_argument("--control-seeds", type=int, default=3)
    parser.add_argument("--targets", type=int, default=3, help="solved envs per class")
    parser.add_argument("--out", type=Path, default=Path("runs/reproduce"))
    parser.add_argument("--results", type=Path, default=ROOT / "experiments" / "results" / "reproduce_poet")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process")
    args = parser.parse_args()
    if args.quick:
        args.iterations, args.seeds, args.control_seeds, args.targets = 12, 1, 1, 1
    t0 = time.perf_counter()
    if not args.quick:  # one Ray instance for every run of the study
        from poet.runtime.ray_session import ensure_ray

        ensure_ray(None)
    command = "python experiments/reproduce_poet.py" + (
        " --quick"
        if args.quick
        else f" --iterations {args.iterations} --seeds {args.seeds} --control-seeds {args.control_seeds}"
        f" --targets {args.targets}"
    )
    result: dict = {
        "command": command,
        "config": str(CONFIG.relative_to(ROOT)),
        "structure": arms.QUICK if args.quick else arms.STRUCTURE,
        "budget_factor": BUDGET_FACTOR,
    }

    # 1: POET, seed 0 (the other arms run last: the controls need only this one)
    poet_arm = arms.run_arm("poet", 0, args.iterations, args.out, args.quick)
    poet_dir = Path(poet_arm["run_dir"])
    run = load_run(poet_dir)
    threshold = float(run.config["solved_threshold"])
    result["solved_threshold"] = threshold
    result["climb"] = climb(poet_dir, every=max(1, args.iterations // 25))

    # 2-3: targets per class and their controls
    result["classes"] = []
    envs = run.envs.set_index("env_id")
    for level, ids in pick_targets(run, args.targets).items():
        entry = {
            "class": level,
            "name": DIFFICULTY_CLASSES[level],
            "created": int((run.envs["difficulty"] == level).sum()),
            "solved": int(((run.envs["difficulty"] == level) & run.envs["solved_iteration"].notna()).sum()),
            "targets": [],
        }
        targets = [EnvParams.from_json(envs.loc[env_id, "params_json"]) for env_id in ids]
        for env_id, target in zip(ids, targets):
            steps = lineage_steps(run, env_id)
            entry["targets"].append(
                {
                    "env_id": env_id,
                    "params": target.values,
                    "hardness": hardness(target.values),
                    "solved_iteration": int(envs.loc[env_id, "solved_iteration"]),
                    "lineage_steps": steps,
                    "budget": BUDGET_FACTOR * max(1, steps),
                    "poet_score": best_recorded(run, env_id),
                    "controls": {},
                }
            )
        for name in CONTROLS:
            for seed in range(args.control_seeds):
                if name in ("accel", "dr"):  # one run per class and seed, scored on every target
                    out = args.out / "controls" / f"class{level}-{name}-seed{seed}"
                    first = min(FIRST_STRETCH, max(t["budget"] for t in entry["targets"]))
                    match_env_steps(
                        out, control_overrides(name, targets[0], seed, args.quick), entry["env_steps"], first
                    )
                    runs = [out] * len(targets)
                else:
                    runs = [args.out / "controls" / f"{t['env_id'][:8]}-{name}-seed{seed}" for t in entry["targets"]]
                    for out, target, t in zip(runs, targets, entry["targets"]):
                        run_or_resume(out, control_overrides(name, target, seed, args.quick), t["budget"])
                for t, target, out in zip(entry["targets"], targets, runs):
                    record = t["controls"].setdefault(name, {"iterations": [], "env_steps": [], "scores": []})
                    control = load_run(out)
                    record["iterations"].append(int(control.phases["iteration"].max()) + 1)
                    record["env_steps"].append(env_steps(control))
                    record["scores"].append(score_of(name, out, control, target, t["env_id"]))
            if name == "direct":  # what ACCEL and DR get: the env steps of the class's longest direct run
                entry["env_steps"] = max(s for t in entry["targets"] for s in t["controls"]["direct"]["env_steps"])
            print(f"class {level} {name}: done ({time.perf_counter() - t0:.0f} s)", flush=True)
        poet_scores = [t["poet_score"] for t in entry["targets"]]
        entry["controls"] = {}
        for name in CONTROLS:
            scores = [s for t in entry["targets"] for s in t["controls"][name]["scores"]]
            entry["controls"][name] = {
                "runs": len(scores),
                "reached_threshold": int(sum(s >= threshold for s in scores)),
                "best": max(scores),
                "median": float(np.median(scores)),
                "env_steps_median": float(
                    np.median([s for t in entry["targets"] for s in t["controls"][name]["env_steps"]])
                ),
                "mann_whitney_poet_greater": rank_test(poet_scores, scores),
            }
        result["classes"].append(entry)

    # 4: both POETs at every seed, for the ANNECS figure
    result["arms"] = [poet_arm]
    for seed in range(args.seeds):
        for arm in arms.ARMS:
            if (arm, seed) != ("poet", 0):
                result["arms"].append(arms.run_arm(arm, seed, args.iterations, args.out, args.quick))
            print(f"{arm} seed {seed}: ANNECS {result['arms'][-1]['annecs']}", flush=True)
    result["seconds"] = round(time.perf_counter() - t0, 1)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "results.json").write_text(json.dumps(result, indent=1, default=float) + "\n")
    (args.results / "results.md").write_text(tables(result))
    figures(result, args.results)
    print((args.results / "results.md").read_text())
    print(f"total wall time {result['seconds']:.0f} s; results in {args.results}")


# --------------------------------------------------------------------------- outputs
def tables(result: dict) -> str:
    """Markdown: per class, POET's envs and each control's runs at the threshold, best score, rank test."""
    threshold = result["solved_threshold"]
    lines = [
        "| class | POET: envs created / solved | targets | control | runs >= "
        f"{threshold:g} | best | median | env steps per run (median) | Mann-Whitney p (POET higher) |",
        "|---" * 9 + "|",
    ]
    for c in result["classes"]:
        for i, name in enumerate(CONTROLS):
            s = c["controls"][name]
            p = s["mann_whitney_poet_greater"]["p"]
            head = (
                f"| {c['class']} {c['name']} | {c['created']} / {c['solved']} | {len(c['targets'])} "
                if i == 0
                else "| | | "
            )
            lines.append(
                head + f"| {name} | {s['reached_threshold']}/{s['runs']} | {s['best']:.0f} | "
                f"{s['median']:.0f} | {s['env_steps_median'] / 1e6:.1f} M | {'n/a' if p is None else f'{p:.3g}'} |"
            )
    lines += [
        "",
        "| class | target | POET solved at | lineage steps | control budget | POET score | "
        + " | ".join(f"{n} (best)" for n in CONTROLS)
        + " |",
        "|---" * (6 + len(CONTROLS)) + "|",
    ]
    for c in result["classes"]:
        for t in c["targets"]:
            cells = [f"{max(t['controls'][n]['scores']):.0f}" for n in CONTROLS]
            lines.append(
                f"| {c['class']} | {t['env_id'][:8]} ({describe(t['params'])}) | {t['solved_iteration']} | "
                f"{t['lineage_steps']} | {t['budget']} | {t['poet_score']:.0f} | " + " | ".join(cells) + " |"
            )
    ends = ", ".join(
        f"{a['arm']} seed {a['seed']}: {a['annecs']}"
        + (f" ({a['annecs_reference']} by the reference code)" if "annecs_reference" in a else "")
        for a in result["arms"]
    )
    return "\n".join(lines + ["", f"ANNECS at the end: {ends}"]) + "\n"


def describe(values: dict) -> str:
    """A course's params in a few words."""
    parts = [f"roughness {values['roughness']:g}"]
    for key, word in (("pit_gap", "pits"), ("stump_height", "stumps")):
        if values[key]:
            parts.append(f"{word} {values[key][0]:g} to {values[key][1]:g}")
    return ", ".join(parts)


def figures(result: dict, out: Path) -> list[Path]:
    """scores.png, climb.png and annecs.png in `out`, from the results (docs/make_pictures.py redraws them)."""
    paths = [out / "scores.png", out / "climb.png", out / "annecs.png"]
    scores_figure(result, paths[0])
    climb_figure(result, paths[1])
    arms.figure(result["arms"], paths[2])
    return paths


def scores_figure(result: dict, path: Path) -> None:
    """Every run's score per class and control, beside POET's, with the solved threshold."""
    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.add_subplot()
    names = ["POET", *CONTROLS]
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for j, c in enumerate(result["classes"]):
            ys = (
                [t["poet_score"] for t in c["targets"]]
                if name == "POET"
                else [s for t in c["targets"] for s in t["controls"][name]["scores"]]
            )
            xs = j + (i - (len(names) - 1) / 2) * width + np.linspace(-0.3, 0.3, len(ys)) * width
            ax.scatter(xs, ys, s=18, color=f"C{i}", label=name if j == 0 else None)
    ax.axhline(result["solved_threshold"], color="k", ls="--", lw=1, label=f"solved ({result['solved_threshold']:g})")
    ax.set_xticks(range(len(result["classes"])), [f"{c['class']}: {c['name']}" for c in result["classes"]])
    ax.set(
        xlabel="the POET paper's difficulty class of the target",
        ylabel="score on the target",
        title="POET's solved envs against its controls, per class",
    )
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.savefig(path, dpi=100)


def climb_figure(result: dict, path: Path) -> None:
    """The largest value of each criterion among POET's solved envs over iterations, with the thresholds."""
    rows = result["climb"]["solved_envs_over_iterations"]
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    for i, (name, threshold) in enumerate(DIFFICULTY_CRITERIA.items()):
        ys = [np.nan if r[f"max_{name}"] is None else r[f"max_{name}"] / threshold for r in rows]
        ax.plot([r["iteration"] + 1 for r in rows], ys, color=f"C{i}", label=f"max {name} / {threshold:g}")
    ax.axhline(1.0, color="k", ls="--", lw=1, label="the paper's criterion")
    ax.set(
        xlabel="iteration",
        ylabel="largest among solved envs / criterion",
        title="How far POET's solved envs climb towards the paper's criteria (seed 0)",
    )
    ax.legend(fontsize="small")
    fig.savefig(path, dpi=100)


if __name__ == "__main__":
    main()
