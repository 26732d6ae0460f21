"""Where a run's records go: the local run store, the tracker (W&B), and the console.

Only the main process (process 0) writes and prints; the others keep quiet, so a
multi-process run leaves one run store and one W&B run. Errors are raised, and so reported,
by every process.
"""

from __future__ import annotations

from typing import Any

from omnilearn_jax.runstore import RunStore


class RunLog:
    def __init__(self, workdir: str, *, is_main: bool = True, tracker=None, append: bool = False):
        self.is_main = is_main
        self.store = RunStore(workdir, append=append) if is_main else None
        self.tracker = tracker

    def say(self, message: str) -> None:
        if self.is_main:
            print(message, flush=True)

    def config(self, resolved: dict[str, Any]) -> None:
        if self.store:
            self.store.write_config(resolved)

    def train(self, record: dict[str, Any]) -> None:
        if self.store:
            self.store.append(record)
        if self.tracker is not None:
            self.tracker.log_train(record)

    def eval(self, record: dict[str, Any]) -> None:
        if self.store:
            self.store.append(record)
        if self.tracker is not None:
            self.tracker.log_eval(record)

    def summary(self, summary: dict[str, Any]) -> None:
        if self.store:
            self.store.write_summary(summary)
        if self.tracker is not None:
            self.tracker.summary(summary)

    def close(self) -> None:
        if self.store:
            self.store.close()
        if self.tracker is not None:
            self.tracker.close()
