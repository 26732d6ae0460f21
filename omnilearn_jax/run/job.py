"""A job: the trainer its config builds, run by the loop its mode names.

The trainer (train.py) knows data, layout, engine and decisions, and nothing of how steps
are scheduled; the BSP loop (loop.py) and the async loop (asp/loop.py) each drive a trainer.
This is the one place that picks between them, so nothing below it imports async.
"""

from __future__ import annotations

from typing import Any

import ml_collections

from omnilearn_jax.run.loop import Loop
from omnilearn_jax.run.train import Trainer


def run(trainer: Trainer) -> dict[str, Any]:
    """Runs a built trainer with the loop of its `mode`; returns the run's summary."""
    if trainer.config.mode == "asp":
        from omnilearn_jax.asp.loop import AsyncLoop

        return AsyncLoop(trainer).run()
    return Loop(trainer).run()


def train_and_evaluate(config: ml_collections.ConfigDict, workdir: str) -> dict[str, Any]:
    """Trains and evaluates as the config says; writes the run store to `workdir`. In an
    async run across processes, process k > 0 is worker k: it serves the server's gradient
    requests (asp/remote.py) and writes nothing (its summary says how many it served)."""
    from omnilearn_jax.run.distributed import async_across, async_worker
    from omnilearn_jax.run.loop import completed_run, same_config_everywhere, say_complete

    # Every process of a joined run has process 0's config; a workdir of another config is
    # refused, and a complete run returns, before anything is loaded, compiled or written
    # there. (An async run across processes: its server returns once it has told each
    # worker, connected as for a run, to stop.)
    if not async_across(config):
        same_config_everywhere(config)
    previous = completed_run(workdir, config)
    if previous is not None and not async_across(config):
        say_complete(workdir, previous)
        return previous
    if async_worker(config):
        from omnilearn_jax.asp.remote import serve

        return {"served": serve(Trainer, config)}
    if previous is not None:
        from omnilearn_jax.asp.remote import dismiss

        dismiss(config)
        say_complete(workdir, previous)
        return previous
    return run(Trainer(config, workdir))
