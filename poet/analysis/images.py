"""Images a report or the CLI produces: PNG stills, animated GIFs (Pillow, no torch) and the
figure of a course profile (matplotlib's `Figure`, no display or pyplot state needed)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from envs.profile import CourseProfile
from poet.config import ConfigError

GROUND, STUMP, PIT, START, FINISH, SKY = "#8c6a46", "#4b2e14", "tab:red", "tab:blue", "k", "#eef4fb"
PROFILE_SIZE = (12.0, 3.4)  # inches: a whole course is some 90 m long and a few metres high
FIGURE_FORMATS = (".png", ".svg", ".pdf")  # what `write_figure` writes, by the file's extension


def write_png(image: np.ndarray, out: str | Path) -> Path:
    """Write an RGB uint8 image as PNG (ConfigError naming the file if it cannot)."""
    from PIL import Image

    path = Path(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.ascontiguousarray(image, dtype=np.uint8)).save(path, format="PNG")
    except OSError as exc:
        raise ConfigError(f"--out {str(path)!r}: cannot write the PNG ({exc.strerror or exc})") from None
    return path


def write_gif(frames: Sequence[np.ndarray], out: str | Path, fps: float, step: int = 1) -> Path:
    """Write frames as a looping animated GIF (each frame lasts `step` / fps seconds)."""
    from PIL import Image

    path = Path(out)
    images = [Image.fromarray(f) for f in frames]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        images[0].save(
            path,
            format="GIF",
            save_all=True,
            append_images=images[1:],
            duration=max(20, round(1000 * step / fps)),
            loop=0,
        )
    except OSError as exc:
        raise ConfigError(f"--out {str(path)!r}: cannot write the GIF ({exc.strerror or exc})") from None
    return path


def profile_title(profile: CourseProfile, env_id: str | None = None) -> str:
    """'terrain env 3fa2c1... · roughness 2.4 · pit gap 0.8-2.4 · stump height 0.4-1.2 · course seed 0'."""
    head = f"{profile.family} env {env_id}" if env_id else profile.family
    seed = [] if profile.seed is None else [f"course seed {profile.seed}"]
    return " · ".join([head, *([profile.description] if profile.description else []), *seed])


def profile_figure(
    profile: CourseProfile, env_id: str | None = None, size: tuple[float, float] = PROFILE_SIZE
) -> Figure:
    """A course seen from the side: axes in metres (the vertical exaggeration, if any, in the
    y label), the ground, pits, stumps, start pad and finish in a legend, the env id and its
    parameters in the title."""
    fig = Figure(figsize=size)
    # fixed margins rather than a layout engine: the axes' size is known before drawing (for the
    # stretch below) and a report's many courses are drawn in one pass each
    left, right, bottom, top = 1.0 / size[0], 1 - 1.55 / size[0], 0.55 / size[1], 1 - 0.35 / size[1]
    fig.subplots_adjust(left=left, right=right, bottom=bottom, top=top)
    ax = fig.add_subplot()
    ax.set_facecolor(SKY)
    lo, hi = profile.extent
    floor = lo - max(1.0, 0.3 * (hi - lo))
    ceiling = hi + max(1.5, 0.3 * (hi - lo))
    solid = np.isfinite(profile.y)
    ax.fill_between(
        profile.x, np.where(solid, profile.y, floor), floor, where=solid, color=GROUND, lw=0, interpolate=False
    )
    ax.plot(profile.x, profile.y, color="#3d6b2a", lw=1.2, zorder=2)  # the surface; NaN leaves a pit open
    handles = [Patch(color=GROUND, label="ground")]
    for x0, x1, _, y1 in profile.solids:  # pit walls: ground too
        ax.add_patch(Rectangle((x0, floor), x1 - x0, y1 - floor, color=GROUND, lw=0))
    for x0, x1 in profile.pits:
        ax.axvspan(x0, x1, color=PIT, alpha=0.25, lw=0, zorder=0.5)  # behind the ground: shows the opening
    if profile.pits:
        handles.append(Patch(color=PIT, alpha=0.25, label=f"pit ({len(profile.pits)})"))
    for x0, x1, y0, y1 in profile.stumps:
        ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, color=STUMP, lw=0, zorder=2))
    if profile.stumps:
        handles.append(Patch(color=STUMP, label=f"stump ({len(profile.stumps)})"))
    ax.axvspan(*profile.start, color=START, alpha=0.15, lw=0, zorder=0.5)
    handles.append(Patch(color=START, alpha=0.15, label="start pad"))
    if profile.finish is not None:
        handles.append(ax.axvline(profile.finish, color=FINISH, ls="--", lw=1.2, label="finish", zorder=3))
    ax.set_xlim(float(profile.x[0]), float(profile.x[-1]))
    ax.set_ylim(floor, ceiling)
    ax.set_title(profile_title(profile, env_id), fontsize="medium")
    ax.set_xlabel("distance along the course (m)")
    ax.legend(handles=handles, fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_ylabel("height (m)")
    width, height = (right - left) * size[0], (top - bottom) * size[1]
    x_span, y_span = float(profile.x[-1] - profile.x[0]), ceiling - floor
    stretch = (x_span / width) / (y_span / height)  # metres per inch across over metres per inch up
    if not 0.9 <= stretch <= 1.1:
        ax.set_ylabel(f"height (m)\nvertical ×{stretch:.{1 if stretch >= 1 else 2}f}")
    return fig


def course_figure(
    family: object, params: object, seed: int = 0, env_id: str | None = None, name: str | None = None
) -> Figure:
    """`profile_figure` of an env's course: its own course when the params are pinned to one,
    else the course of `seed`. ConfigError if the family gives no course profile."""
    describe = getattr(family, "course_profile", None)
    if describe is None:
        name = name or getattr(family, "name", type(family).__name__)
        raise ConfigError(
            f"env family {name!r} has no course profile to draw (terrain, bipedal, bipedal_cppn, terrain_cppn do)"
        )
    return profile_figure(describe(params, seed=params.reset_seed(seed)), env_id)


def figure_rgb(fig: Figure, dpi: int = 100) -> np.ndarray:
    """A figure as an RGB uint8 image (drawn on an Agg canvas, no display)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(dpi)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[:, :, :3].copy()


def check_figure_out(out: str | Path, option: str = "--out") -> Path:
    """`out` if its extension is one `write_figure` writes, else ConfigError naming them."""
    path = Path(out)
    if path.suffix.lower() not in FIGURE_FORMATS:
        raise ConfigError(
            f"{option} {str(path)!r}: writes {', '.join(FIGURE_FORMATS)} files; got {path.suffix or 'no extension'}"
        )
    return path


def write_figure(fig: Figure, out: str | Path, dpi: int = 100) -> Path:
    """Write a figure as PNG, SVG or PDF, by the file's extension (ConfigError naming the file if it cannot)."""
    path = check_figure_out(out)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format=path.suffix.lower()[1:], dpi=dpi)
    except OSError as exc:
        raise ConfigError(f"--out {str(path)!r}: cannot write the figure ({exc.strerror or exc})") from None
    return path
