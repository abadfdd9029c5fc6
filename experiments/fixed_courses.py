"""The study's fixed courses: per class 1-3, 20 courses drawn before its runs (docs/study-plan.md).

    python experiments/fixed_courses.py                       # writes experiments/results/reproduce_poet/fixed_courses.json
    python experiments/fixed_courses.py --quick --json /tmp/fixed.json    # 3 courses per class

Per class c, a generator seeded 2026 + c draws params as the family samples them
(`TerrainFamily.sample`, dcd's POET-mode draw) and a course seed, and keeps the pair only
when both of these hold:

- the course realises the class: its drawn obstacles and roughness meet exactly c of the
  paper's criteria (`envs.terrain.course_difficulty`);
- the planner (`envs.terrain_planner`, the feasibility study's beam search over the
  runner's own core) clears it within the study's episode cap, so a method that fails it
  fails a course some action sequence clears.

The file lists, per class, every kept course (params, course seed, its widest pit and
tallest stump in the params' units) and how many draws it took. The study scores every
method's agents on these courses. They are fixed before its runs, and are its second
design, the one that the choice of targets cannot touch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time
from pathlib import Path

import numpy as np

import poet
from envs import make_family
from envs.terrain import course_difficulty, realised_sizes
from envs.terrain_planner import plan

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
CONFIG = ROOT / "experiments" / "reproduce_poet.yaml"
CLASSES = (1, 2, 3)
SEED_BASE = 2026


def draw_class(family, c: int, count: int, max_steps: int) -> dict:
    """`count` courses of class c, drawn and kept as the module says."""
    rng = np.random.default_rng(SEED_BASE + c)
    kept, draws, realised_only = [], 0, 0
    while len(kept) < count:
        params = family.sample(rng)
        seed = int(rng.integers(0, 2**31 - 1))
        draws += 1
        course = family.course(params, seed)
        if course_difficulty(course, params.values["roughness"]) != c:
            continue
        realised_only += 1
        cleared, _ = plan(course, max_steps)
        if cleared:
            kept.append({"params": params.values, "course_seed": seed, **realised_sizes(course)})
    return {"courses": kept, "draws": draws, "realised_class": realised_only}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="courses per class")
    parser.add_argument(
        "--json", type=Path, default=None, help="default: experiments/results/reproduce_poet/fixed_courses.json"
    )
    parser.add_argument("--quick", action="store_true", help="3 courses per class; needs --json outside results")
    args = parser.parse_args()
    if args.quick:
        if args.json is None or args.json.resolve().is_relative_to(RESULTS):
            parser.error("--quick writes only where --json says, outside experiments/results/")
        args.count = 3
    out_path = args.json or RESULTS / "reproduce_poet" / "fixed_courses.json"
    cfg = poet.load_config(CONFIG)
    family, max_steps = make_family(cfg.env.family), int(cfg.evaluation.max_steps)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    t0 = time.perf_counter()
    out: dict = {
        "command": "python experiments/fixed_courses.py" + (f" --count {args.count}" if args.count != 20 else ""),
        "commit": commit,
        "family": cfg.env.family,
        "max_steps": max_steps,
        "seed_base": SEED_BASE,
        "classes": {},
    }
    for c in CLASSES:
        out["classes"][str(c)] = draw_class(family, c, args.count, max_steps)
        found = out["classes"][str(c)]
        print(f"class {c}: {args.count} courses from {found['draws']} draws ({found['realised_class']} of the class)")
    out["wall_seconds"] = round(time.perf_counter() - t0, 1)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(out, indent=2) + "\n")
    print(f"wrote {out_path} in {out['wall_seconds']} s")


if __name__ == "__main__":
    main()
