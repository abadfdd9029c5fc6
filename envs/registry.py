"""The family registry (a plain dict) and gymnasium registration under `poet/`."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym

from envs.base import EnvFamily, EnvParams

SPEC_DIR = Path(__file__).parent / "specs"


def _terrain(**options: Any) -> EnvFamily:
    from envs.terrain import TerrainFamily

    return TerrainFamily(**options)


def _bipedal(**options: Any) -> EnvFamily:
    from envs.bipedal import BipedalFamily

    return BipedalFamily(**options)


def _bipedal_cppn(**options: Any) -> EnvFamily:
    from envs.bipedal_cppn import BipedalCPPNFamily

    return BipedalCPPNFamily(**options)


def _terrain_cppn(**options: Any) -> EnvFamily:
    from envs.terrain_cppn import TerrainCPPNFamily

    return TerrainCPPNFamily(**options)


def _gym_spec(spec_name: str) -> Callable[..., EnvFamily]:
    def factory(**options: Any) -> EnvFamily:
        from envs.generic import GymFamily

        return GymFamily.from_yaml(SPEC_DIR / f"{spec_name}.yaml", **options)

    factory.__name__ = f"gym_{spec_name}"
    return factory


def _gym(**options: Any) -> EnvFamily:
    from envs.generic import GymFamily

    return GymFamily.from_options(**options)


# name -> factory(**options). A test runs gymnasium's check_env over every entry.
FAMILIES: dict[str, Callable[..., EnvFamily]] = {
    "terrain": _terrain,
    "bipedal": _bipedal,
    "bipedal_cppn": _bipedal_cppn,
    "terrain_cppn": _terrain_cppn,
    "lunar_lander": _gym_spec("lunar_lander"),
    "cartpole": _gym_spec("cartpole"),
    # Any gymnasium env with numeric constructor kwargs, registered or of a user's module
    # (`env_id: "mymodule:MyEnv-v0"`); needs options `spec: path/to/spec.yaml` or an inline
    # spec (env_id, params, ...).
    "gym": _gym,
}

# Options that the registry-wide tests use for families that cannot be built bare.
EXAMPLE_OPTIONS: dict[str, dict[str, Any]] = {"gym": {"spec": str(SPEC_DIR / "lunar_lander.yaml")}}

# gymnasium ids under the poet/ namespace, one per family that builds without options.
GYMNASIUM_IDS: dict[str, str] = {
    "terrain": "poet/Terrain-v0",
    "bipedal": "poet/BipedalTerrain-v0",
    "bipedal_cppn": "poet/BipedalCPPN-v0",
    "terrain_cppn": "poet/TerrainCPPN-v0",
    "lunar_lander": "poet/LunarLanderContinuous-v0",
    "cartpole": "poet/CartPole-v0",
}


def make_family(name: str, options: Mapping[str, Any] | None = None) -> EnvFamily:
    """Build a registered family; an unknown name raises KeyError listing the known ones."""
    if name not in FAMILIES:
        known = ", ".join(sorted(FAMILIES))
        raise KeyError(f"unknown env family {name!r}; registered families: {known}")
    return FAMILIES[name](**dict(options or {}))


def make_registered_env(family: str, params: Any = None, render_mode: str | None = None, **options: Any) -> gym.Env:
    """gymnasium entry point: `gymnasium.make("poet/Terrain-v0", params=...)`.

    `params` may be EnvParams, their dict form, or a plain dict of values; None gives the
    family's initial params.
    """
    fam = make_family(family, options)
    if params is None:
        p = fam.initial()
    elif isinstance(params, EnvParams):
        p = params
    elif isinstance(params, Mapping) and "values" in params and "family" in params:
        p = EnvParams.from_dict(params)
    else:
        p = EnvParams.create(fam.name, dict(params))
    fam.validate(p)
    return fam.make_env(p, render_mode=render_mode)


def register_gymnasium_envs() -> None:
    """Register one gymnasium id per option-free family (idempotent)."""
    for family, env_id in GYMNASIUM_IDS.items():
        if env_id in gym.registry:
            continue
        gym.register(id=env_id, entry_point="envs.registry:make_registered_env", kwargs={"family": family})
