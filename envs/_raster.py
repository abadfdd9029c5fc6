"""Tiny numpy drawing helpers for rgb_array renders (no pygame, no PIL)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

Color = Sequence[int]


def blank(height: int, width: int, color: Color) -> np.ndarray:
    """A (height, width, 3) uint8 image filled with one color."""
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = np.asarray(color, dtype=np.uint8)
    return img


def fill_columns(
    img: np.ndarray, top: np.ndarray, color: Color, bottom: np.ndarray | None = None, mask: np.ndarray | None = None
) -> None:
    """Paint each column j from row top[j] down to row bottom[j] (exclusive; image bottom if None)."""
    rows = np.arange(img.shape[0])[:, None]
    paint = rows >= np.asarray(top)[None, :]
    if bottom is not None:
        paint &= rows < np.asarray(bottom)[None, :]
    if mask is not None:
        paint &= np.asarray(mask, dtype=bool)[None, :]
    img[paint] = np.asarray(color, dtype=np.uint8)


def fill_rect(img: np.ndarray, col0: float, row0: float, col1: float, row1: float, color: Color) -> None:
    """Paint the pixel rectangle [row0, row1) x [col0, col1), clipped to the image."""
    h, w = img.shape[:2]
    r0, r1 = int(np.clip(np.floor(row0), 0, h)), int(np.clip(np.ceil(row1), 0, h))
    c0, c1 = int(np.clip(np.floor(col0), 0, w)), int(np.clip(np.ceil(col1), 0, w))
    if r0 < r1 and c0 < c1:
        img[r0:r1, c0:c1] = np.asarray(color, dtype=np.uint8)


def checkered_line(img: np.ndarray, col: float, width: int = 3, cell: int = 6) -> None:
    """A vertical black-and-white checkered line (a finish line) centred on column col."""
    h, w = img.shape[:2]
    c0 = int(round(col)) - width // 2
    cols = np.arange(c0, c0 + width)
    cols = cols[(cols >= 0) & (cols < w)]
    if cols.size == 0:
        return
    white = (np.arange(h) // cell) % 2 == 0
    img[:, cols] = 0
    img[np.ix_(np.flatnonzero(white), cols)] = 255
