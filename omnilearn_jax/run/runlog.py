"""Where a run's records go: the local run store, the tracker (W&B), and the console.

Only the main process (process 0) writes and prints; the others keep quiet, so a
multi-process run leaves one run store and one W&B run. Errors are raised, and so reported,
by every process.
"""

from __future__ import annotations

from typing import Any

from omnilearn_jax.run.runstore import RunStore

# The keys only a stopped run's summary has (Runner.stopped)
STOPPED_KEYS = ("error", "last_checkpoint", "resume_step")


class RunLog:
    def __init__(self, workdir: str, *, is_main: bool = True, tracker=None, append: bool = False):
        self.is_main = is_main
        self.store = RunStore(workdir, append=append) if is_main else None
        self.tracker = tracker
        self._final: dict[str, Any] | None = None

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
        """A "running" summary is written at once; a final one (complete or failed) only in
        `close`, after the tracker has finished writing: a complete summary.json then means
        that everything of the run, its W&B files included, is on disk (the ablation runner
        skips such a cell on a rerun, even if it was killed just after)."""
        if self.tracker is not None:
            # W&B merges a run's summary updates: a resumed run that completes clears what
            # an earlier session's stop said (its error stayed on the finished run)
            cleared = {k: None for k in STOPPED_KEYS} if summary.get("status") == "complete" else {}
            self.tracker.summary({**cleared, **summary})
        if summary.get("status") == "running":
            if self.store:
                self.store.write_summary(summary)
        else:
            self._final = summary

    def close(self) -> None:
        try:
            if self.tracker is not None:  # a failed or interrupted run is not "finished" in W&B
                final = (self._final or {}).get("status")
                self.tracker.close(exit_code=0 if final in (None, "complete") else 1)
        finally:  # the run store says how the run ended, whatever the tracker's close raised
            if self.store:
                if self._final is not None:
                    self.store.write_summary(self._final)
                self.store.close()
