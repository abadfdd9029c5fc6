"""Redraw every picture the README and the documentation pages show (deterministic: the same files on every run).

    python docs/make_pictures.py                          # all of them
    python docs/make_pictures.py --only profiles frames   # some groups (or single pictures)
    python docs/make_pictures.py --only tree --run runs/quickstart-...   # the tree of a run you made

Groups and the files they write:

* profiles: docs/bipedal_mutated.png, docs/terrain_mutated.png (one mutated POET course:
  roughness 2.4, pit gap [0.8, 2.4], stump height [0.4, 1.2], on the `bipedal` and `terrain`
  families) and docs/bipedal_cppn_mutated.png (the ground of a CPPN that took CPPN_MUTATIONS
  seeded mutations from Enhanced POET's random start), drawn as `poet profile` draws a course;
* frames: docs/bipedal_frame.png, docs/bipedal_cppn_frame.png: the walker on those two
  courses as gymnasium renders it (the frames of `poet render`'s GIFs);
* tree: docs/quickstart_env_tree.png: `poet.analysis.report.env_tree_figure` (the report's own
  figure) of a run of experiments/quickstart.yaml, the run `make run` makes, and the
  population figures of the same run (`poet.analysis.figures`: docs/quickstart_phylogeny.png,
  quickstart_env_param_map.png, quickstart_cross_eval.png, quickstart_robustness.png, the
  last two scoring its agents again); `--run DIR` draws an existing one, otherwise the
  quickstart runs first (into a temporary folder);
* reproduce: experiments/results/reproduce_poet/scores.png, climb.png and annecs.png, redrawn
  by experiments/reproduce_poet.py's own `figures` from the results.json next to them (the
  study itself takes over an hour on 2 cores: `python experiments/reproduce_poet.py`).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import numpy as np  # noqa: E402

import envs  # noqa: E402
from envs import EnvParams  # noqa: E402

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"
REPRODUCE = ROOT / "experiments" / "results" / "reproduce_poet"
POET_COURSE = {"roughness": 2.4, "pit_gap": [0.8, 2.4], "stump_height": [0.4, 1.2]}
CPPN_SEED, CPPN_MUTATIONS = 7, 40
FRAME_STEPS = 40  # the walker stands still this many steps, so the frame shows it on the ground


def walker_frame(family: envs.EnvFamily, params: EnvParams) -> np.ndarray:
    """gymnasium's rgb_array view after FRAME_STEPS steps of zero torque."""
    env = family.make_env(params, render_mode="rgb_array")
    try:
        env.reset(seed=0)
        for _ in range(FRAME_STEPS):
            env.step(np.zeros(env.action_space.shape, dtype=np.float32))
        return env.render()
    finally:
        env.close()


def cppn_course(family: envs.EnvFamily) -> EnvParams:
    """The CPPN_MUTATIONS-th mutation of the random start, one rng seeded with CPPN_SEED for all."""
    rng = np.random.default_rng(CPPN_SEED)
    params = family.initial(rng)
    for _ in range(CPPN_MUTATIONS):
        params = family.mutate(params, rng)
    return params


def courses() -> dict[str, tuple[envs.EnvFamily, EnvParams]]:
    """The family and params of each course picture, by family name."""
    cppn = envs.make_family("bipedal_cppn")
    return {
        "bipedal": (envs.make_family("bipedal"), EnvParams.create("bipedal", POET_COURSE)),
        "terrain": (envs.make_family("terrain"), EnvParams.create("terrain", POET_COURSE)),
        "bipedal_cppn": (cppn, cppn_course(cppn)),
    }


def draw_profiles(args: argparse.Namespace) -> list[Path]:
    """docs/<family>_mutated.png: each course as `poet profile` draws it (seed 0)."""
    from poet.analysis.images import course_figure, write_figure

    out = []
    for name, (family, params) in courses().items():
        out.append(write_figure(course_figure(family, params, seed=0, env_id=params.id), DOCS / f"{name}_mutated.png"))
    family, grown = courses()["bipedal_cppn"]
    stats = family.flat(grown)
    print(
        f"cppn course: {stats['hidden_nodes']:.0f} hidden nodes, {stats['connections']:.0f} connections, "
        f"amplitude {stats['amplitude']:.2f} m, max slope {stats['max_slope']:.2f}"
    )
    return out


def draw_frames(args: argparse.Namespace) -> list[Path]:
    """docs/bipedal_frame.png, docs/bipedal_cppn_frame.png: the walker on its course."""
    from poet.analysis.images import write_png

    found = courses()
    return [write_png(walker_frame(*found[name]), DOCS / f"{name}_frame.png") for name in ("bipedal", "bipedal_cppn")]


def draw_tree(args: argparse.Namespace) -> list[Path]:
    """docs/quickstart_env_tree.png: the report's env tree of a quickstart run (`--run`, or a new one)."""
    import poet
    from poet.analysis import load_run
    from poet.analysis.report import env_tree_figure, figure_png

    if args.run is not None:
        return _write_tree(load_run(args.run), env_tree_figure, figure_png)
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [] if args.workers is None else [f"ray.workers={args.workers}"]
        result = poet.run(QUICKSTART, out=Path(tmp) / "quickstart", overrides=overrides, progress=False)
        return _write_tree(load_run(result.run_dir), env_tree_figure, figure_png)


def _write_tree(run, env_tree_figure: Callable, figure_png: Callable) -> list[Path]:
    written = []
    for name, fig in {"env_tree": env_tree_figure(run), **population_figures(run)}.items():
        path = DOCS / f"quickstart_{name}.png"
        path.write_bytes(figure_png(fig))
        written.append(path)
    return written


def population_figures(run) -> dict:
    """The population figures of a run as the analysis docs show them, by name."""
    from poet.analysis import figures

    active = [a for a in run.agents() if a.active]
    return {
        "phylogeny": figures.phylogeny_figure(run),
        "env_param_map": figures.param_heatmap_figure(run, "roughness", "pit_gap_hi"),
        "cross_eval": figures.cross_eval_figure(run, run.cross_eval(agents=active, cache=False)),
        "robustness": figures.robustness_figure(run.robustness(1, agents=active, n=50)),
    }


def draw_reproduce(args: argparse.Namespace) -> list[Path]:  # noqa: ARG001 - nothing to choose
    """The figures of the POET reproduction study, from its results.json."""
    spec = importlib.util.spec_from_file_location("reproduce_poet", ROOT / "experiments" / "reproduce_poet.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.figures(json.loads((REPRODUCE / "results.json").read_text()), REPRODUCE)


# What each group writes, relative to the repository root (the README or a page of docs/ shows every one).
PICTURES: dict[str, list[str]] = {
    "profiles": ["docs/bipedal_mutated.png", "docs/terrain_mutated.png", "docs/bipedal_cppn_mutated.png"],
    "frames": ["docs/bipedal_frame.png", "docs/bipedal_cppn_frame.png"],
    "tree": [
        f"docs/quickstart_{name}.png" for name in ("env_tree", "phylogeny", "env_param_map", "cross_eval", "robustness")
    ],
    "reproduce": [f"experiments/results/reproduce_poet/{name}.png" for name in ("scores", "climb", "annecs")],
}
GROUPS: dict[str, Callable[[argparse.Namespace], list[Path]]] = {
    "profiles": draw_profiles,
    "frames": draw_frames,
    "tree": draw_tree,
    "reproduce": draw_reproduce,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(GROUPS),
        metavar="GROUP",
        help=f"draw only these groups: {', '.join(GROUPS)} (default: all)",
    )
    parser.add_argument("--run", type=Path, help="tree: an existing run of experiments/quickstart.yaml to draw")
    parser.add_argument("--workers", type=int, help="tree: Ray workers for the quickstart run (default: all CPUs)")
    args = parser.parse_args(argv)
    for name in args.only or list(GROUPS):
        written = GROUPS[name](args)
        assert [p.relative_to(ROOT).as_posix() for p in written] == PICTURES[name], (name, written)
        for path in written:
            print(path.relative_to(ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
