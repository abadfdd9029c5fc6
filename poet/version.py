"""This package's version, where every layer can read it (checkpoints and run records carry it)."""

__version__ = "0.1.0"
