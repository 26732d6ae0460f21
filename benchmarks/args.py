"""Argument checks the benchmarks share: counts a run cannot do without."""

from __future__ import annotations

import argparse

# A timed run's first steps, left out of its medians (first executions, warm caches).
SKIPPED = 5


def at_least(parser: argparse.ArgumentParser, **least: tuple[int | float, int | float]) -> None:
    """`flag=(value, least)` for each count, its flag's dashes as underscores: one parser
    error for the first below its least (a count of 0 had printed a table of NaN, or failed
    late with a StatisticsError or an IndexError)."""
    for name, (value, smallest) in least.items():
        if value < smallest:
            parser.error(f"--{name.replace('_', '-')} must be >= {smallest}, got {value}")


def ints(parser: argparse.ArgumentParser, flag: str, text: str, least: int | None = None):
    """A comma-separated list of integers given to `--flag`, one or more, each >= `least`
    if given; else one parser error (an empty list had run nothing, or failed with a bare
    "invalid literal for int()")."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        parser.error(f"--{flag} takes integers separated by commas, got {text!r}")
    if least is not None and min(values) < least:
        parser.error(f"--{flag}: each value must be >= {least}, got {text!r}")
    return values


def writable(parser: argparse.ArgumentParser, **paths: str) -> None:
    """`flag=path` for each output file ('' = not asked for): one parser error for the first
    whose folder does not exist, before any run (the file was opened after minutes of runs,
    with a FileNotFoundError traceback, and the outputs written before it were left behind)."""
    import os

    for name, path in paths.items():
        folder = os.path.dirname(os.path.abspath(path)) if path else ""
        if folder and not os.path.isdir(folder):
            parser.error(f"--{name.replace('_', '-')} {path}: no folder {folder}")


def existing(parser: argparse.ArgumentParser, **paths: str) -> None:
    """`flag=path` for each input file ('' = not given): one parser error for the first that
    is not a file (a FileNotFoundError traceback, or a table silently left out)."""
    import os

    for name, path in paths.items():
        if path and not os.path.isfile(path):
            parser.error(f"--{name.replace('_', '-')} {path}: no such file")


def model_name(
    parser: argparse.ArgumentParser, name: str, flag: str = "model", images: bool = False
) -> None:
    """A parser error for a model name the trainer does not know (it was a ValueError
    traceback from inside the first run), or, with `images`, for a model that does not take
    the benchmark's images (the transformer takes token sequences: a ValueError from inside
    the first run too)."""
    from omnilearn_jax import models

    try:
        models.check_name(name)
    except ValueError as e:
        parser.error(f"--{flag}: {e}")
    if images and name == "transformer":
        image_models = ", ".join(m for m in models.available() if m != "transformer")
        parser.error(f"--{flag} {name} takes token sequences; this benchmark feeds images: "
                     f"{image_models}")  # fmt: skip
