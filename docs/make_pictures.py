"""Redraw the README's environment pictures in docs/ (deterministic: same files every run).

    python docs/make_pictures.py

* bipedal_mutated.png, bipedal_frame.png, terrain_mutated.png: one mutated POET course
  (roughness 2.4, pit gap [0.8, 2.4], stump height [0.4, 1.2]) drawn by the `bipedal` and
  `terrain` families, and the walker's own view of its start on `bipedal`;
* bipedal_cppn_mutated.png, bipedal_cppn_frame.png: the ground of a CPPN that took
  CPPN_MUTATIONS seeded mutations from Enhanced POET's random start (the reference's
  operators), and the walker on it.

docs/quickstart_env_tree.png is a figure of `poet report` on the quickstart run instead.
"""
from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import numpy as np  # noqa: E402

import envs  # noqa: E402
from envs import EnvParams  # noqa: E402
from poet.images import write_png  # noqa: E402

DOCS = Path(__file__).resolve().parent
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


def main() -> None:
    bipedal, terrain, cppn = (envs.make_family(n) for n in ("bipedal", "terrain", "bipedal_cppn"))
    course = EnvParams.create("bipedal", POET_COURSE)
    pictures = {
        "bipedal_mutated.png": bipedal.render_profile(course, seed=0),
        "bipedal_frame.png": walker_frame(bipedal, course),
        "terrain_mutated.png": terrain.render_profile(EnvParams.create("terrain", POET_COURSE), seed=0),
    }
    grown = cppn_course(cppn)
    pictures["bipedal_cppn_mutated.png"] = cppn.render_profile(grown)
    pictures["bipedal_cppn_frame.png"] = walker_frame(cppn, grown)
    for name, image in pictures.items():
        print(write_png(image, DOCS / name))
    stats = cppn.flat(grown)
    print(f"cppn course: {stats['hidden_nodes']:.0f} hidden nodes, {stats['connections']:.0f} connections, "
          f"amplitude {stats['amplitude']:.2f} m, max slope {stats['max_slope']:.2f}")


if __name__ == "__main__":
    main()
