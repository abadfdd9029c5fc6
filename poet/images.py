"""Writing images a report or the CLI produces: PNG stills and animated GIFs (Pillow, no torch)."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from poet.config import ConfigError


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
        images[0].save(path, format="GIF", save_all=True, append_images=images[1:],
                       duration=max(20, round(1000 * step / fps)), loop=0)
    except OSError as exc:
        raise ConfigError(f"--out {str(path)!r}: cannot write the GIF ({exc.strerror or exc})") from None
    return path
