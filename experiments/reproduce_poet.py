"""POET's headline on a laptop: envs POET generates and solves, which direct optimisation
does not solve with the same budget; and Enhanced POET's ANNECS against the original's.

    python experiments/reproduce_poet.py [--config experiments/reproduce_poet.yaml] [--targets 3]
                                         [--seeds 2] [--out runs/reproduce] [--quick]

1. POET (reference defaults, `experiments/reproduce_poet.yaml`) runs on the fast terrain
   family.
2. The hardest envs it solved (by the family's features, each scaled to its range) are the
   targets. For each, the budget is the trainer steps the POET lineage spent to solve it
   (every iteration row of the pairs on the chain of envs from the start to the target, up
   to when it was solved).
3. With that budget, from a fresh agent, several seeds each:
   - `direct`: ES on the target itself (on its very course);
   - `path`: the direct-path curriculum, from the start course to the target in 10 stages;
   - `accel` and `dr`.
   Every final agent is scored on the target's own course, as POET's pair was.
4. Original POET and Enhanced POET run with the same iterations; both ANNECS counts
   (the paper's and the reference code's) are recorded.
5. It writes `results.json` (every number), `results.md` (the tables) and
   `targets.png` / `annecs.png` in `--out`.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import poet
from envs import EnvParams
from poet.analysis import Run, load_run

ROOT = Path(__file__).resolve().parents[1]
BASELINES = ("direct", "path", "accel", "dr")


def difficulty(run: Run) -> dict[str, float]:
    """Each env's difficulty: the family's features, each divided by its largest value in the run, summed."""
    from envs import make_family

    family = make_family(run.config["env"]["family"], run.config["env"].get("options") or {})
    feats = np.stack([family.features(EnvParams.from_json(t)) for t in run.envs["params_json"]])
    scale = np.where(feats.max(axis=0) > 0, feats.max(axis=0), 1.0)
    return dict(zip(run.envs["env_id"], (feats / scale).sum(axis=1)))


def lineage_budget(run: Run, env_id: str) -> int:
    """Trainer steps along the chain of envs from the start to `env_id`, up to its solving."""
    parent = dict(zip(run.envs["env_id"], run.envs["parent_env_id"]))
    chain, node = [], env_id
    while isinstance(node, str):
        chain.append(node)
        node = parent.get(node)
    solved = int(run.envs.set_index("env_id").loc[env_id, "solved_iteration"])
    rows = run.iterations[run.iterations["env_id"].isin(chain) & (run.iterations["iteration"] <= solved)]
    return int(len(rows))


def score_on(run_dir: Path, target: EnvParams) -> float:
    """The best final agent of a run, scored on the target's own course (the run's evaluation settings)."""
    from poet.evaluation import EvalRequest, InProcessEvaluator
    from poet.render import load_agents

    parts, snapshot = load_agents(run_dir)
    evaluator = InProcessEvaluator(parts.family, parts.spec)
    agents = snapshot.state.population.active
    requests = [EvalRequest(evaluator.put(a.theta), target, parts.cfg.evaluation.eval_episodes, 0,
                            parts.cfg.evaluation.max_steps, tag=a.pair_id) for a in agents]
    return float(max(r.mean for r in evaluator.evaluate(requests)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=ROOT / "experiments" / "reproduce_poet.yaml")
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "runs" / "reproduce")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra config override")
    parser.add_argument("--quick", action="store_true", help="a smoke run: tiny sizes, in-process")
    args = parser.parse_args()
    sets = list(args.set)
    if args.quick:
        args.targets, args.seeds = 1, 1
        sets = ["iterations=24", "evaluation.backend=inprocess", "evaluation.max_steps=100", "trainer.es.population=8",
                "env.options.course_length=20", "reproduction.every=8", "reproduction.threshold=50",
                "reproduction.mc_lower=-1000", "solved_threshold=60", *sets]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    result: dict = {"args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}

    # 1-2: POET and its hardest solved envs
    poet.run(args.config, out=args.out / "poet", overrides=sets, progress=False)
    run = load_run(args.out / "poet")
    threshold = float(run.config["solved_threshold"])
    solved = run.envs[run.envs["solved_iteration"].notna()]
    hard = difficulty(run)
    targets = sorted(solved["env_id"], key=lambda e: -hard[e])[:args.targets]
    result["poet"] = {"iterations": int(run.config["iterations"]), "envs": int(len(run.envs)),
                      "solved": int(len(solved)), "annecs": int(run.annecs.iloc[-1])}

    # 3: the baselines on each target, with the POET lineage's budget
    result["targets"] = []
    for env_id in targets:
        row = run.envs.set_index("env_id").loc[env_id]
        target = EnvParams.from_json(row["params_json"])
        budget = max(1, lineage_budget(run, env_id))
        entry = {"env_id": env_id, "params": target.values, "difficulty": hard[env_id], "budget": budget,
                 "poet_solved_at": int(row["solved_iteration"]), "baselines": {}}
        for name in BASELINES:
            scores = []
            for seed in range(args.seeds):
                out = args.out / f"{env_id}-{name}-{seed}"
                over = [*sets, f"curriculum={name}", f"seed={100 + seed}", f"iterations={budget}", "checkpoint.every=0"]
                if name == "direct":
                    over.append(f"env.start={json.dumps(target.to_dict())}")
                if name == "path":
                    over.append(f"curriculum_options={json.dumps({'target': target.to_dict(), 'stages': 10})}")
                if name == "accel":
                    over.append("curriculum_options={buffer_size: 100, new_levels: 8}")
                poet.run(args.config, out=out, overrides=over, progress=False)
                scores.append(score_on(out, target))
            entry["baselines"][name] = {"scores": scores, "best": max(scores),
                                        "solved": sum(s >= threshold for s in scores), "seeds": len(scores)}
        result["targets"].append(entry)

    # 4: original POET and Enhanced POET with the same iterations
    poet.run(args.config, out=args.out / "enhanced_poet", overrides=[*sets, "curriculum=enhanced_poet"], progress=False)
    enhanced = load_run(args.out / "enhanced_poet")
    result["annecs"] = {
        "poet": run.annecs.tolist(), "enhanced_poet": enhanced.annecs.tolist(),
        "enhanced_poet_reference_counter": enhanced.annecs_reference.tolist(),
    }
    result["seconds"] = round(time.perf_counter() - t0, 1)
    (args.out / "results.json").write_text(json.dumps(result, indent=2, default=float))
    (args.out / "results.md").write_text(tables(result, threshold))
    figures(result, threshold, args.out)
    print((args.out / "results.md").read_text())
    print(f"total wall time {result['seconds']:.0f} s; results in {args.out}")


def tables(result: dict, threshold: float) -> str:
    """Markdown: per target, POET's iteration solved and each baseline's best score and seeds solved."""
    lines = [f"| target | difficulty | budget (trainer steps) | POET solved at | "
             + " | ".join(BASELINES) + " |", "|---" * (4 + len(BASELINES)) + "|"]
    for t in result["targets"]:
        cells = [f"{b['best']:.0f} ({b['solved']}/{b['seeds']} solved)" for b in (t["baselines"][n] for n in BASELINES)]
        lines.append(f"| {t['env_id'][:8]} | {t['difficulty']:.2f} | {t['budget']} | {t['poet_solved_at']} | "
                     + " | ".join(cells) + " |")
    a = result["annecs"]
    lines += ["", f"solved threshold {threshold:g}; ANNECS at the end: POET {a['poet'][-1]}, Enhanced POET "
              f"{a['enhanced_poet'][-1]} (reference code's counter {a['enhanced_poet_reference_counter'][-1]})"]
    return "\n".join(lines) + "\n"


def figures(result: dict, threshold: float, out: Path) -> None:
    """targets.png (each baseline's best score per target) and annecs.png (both POETs)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(9, 4), layout="constrained")
    ax = fig.add_subplot()
    n = len(result["targets"])
    for i, name in enumerate(BASELINES):
        ax.bar(np.arange(n) + (i - 1.5) * 0.2, [t["baselines"][name]["best"] for t in result["targets"]], 0.2,
               label=name)
    ax.axhline(threshold, color="k", ls="--", lw=1, label=f"solved ({threshold:g}): POET solved every target")
    ax.set_xticks(range(n), [t["env_id"][:8] for t in result["targets"]])
    ax.set(xlabel="target env (hardest POET solved first)", ylabel="best score on the target",
           title="Baselines with the POET lineage's budget")
    ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.0, 0.5))
    fig.savefig(out / "targets.png", dpi=100)
    fig = Figure(figsize=(9, 3.5), layout="constrained")
    ax = fig.add_subplot()
    for key, label in (("poet", "POET"), ("enhanced_poet", "Enhanced POET"),
                       ("enhanced_poet_reference_counter", "Enhanced POET (reference code's counter)")):
        ax.step(range(len(result["annecs"][key])), result["annecs"][key], where="post", label=label)
    ax.set(xlabel="iteration", ylabel="ANNECS", title="ANNECS with the same budget")
    ax.legend(fontsize="small")
    fig.savefig(out / "annecs.png", dpi=100)


if __name__ == "__main__":
    main()
