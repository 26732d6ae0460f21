"""Ctrl-C and SIGTERM: stop at a step boundary, save, and say how to continue.

Outside a training loop both signals raise `Interrupted` at once (SIGTERM's default would
kill the process without a word, leaving a run store that still reads "running"). Inside
one (`deferred()`), the first signal only sets a flag that the loop reads after each step
(`check()`), so the state it checkpoints belongs to a whole step; a second signal raises at
once, for a step that hangs. Handlers are installed only on the main thread of a
one-process run: in a multi-process run a checkpoint needs every process, and a signal
reaches only some of them, so there the signal raises at once and nothing is saved.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupted(KeyboardInterrupt):
    """A stop asked for by a signal; a KeyboardInterrupt, so `except Exception` lets it by."""

    def __init__(self, signum: int = signal.SIGINT, *, at_boundary: bool = False):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.at_boundary = at_boundary  # raised between steps: the state is whole

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


def _raise(signum, frame) -> None:
    del frame
    raise Interrupted(signum)


def _on_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def raise_on_signals() -> None:
    """SIGINT and SIGTERM raise `Interrupted` (for the command line, before any loop)."""
    if _on_main_thread():
        for signum in SIGNALS:
            signal.signal(signum, _raise)


class Deferred:
    """The flag set by the first signal; `check()` raises `Interrupted` once it is set."""

    def __init__(self) -> None:
        self.signum: int | None = None

    def handle(self, signum, frame) -> None:
        if self.signum is not None:  # the second signal: stop now, whatever the state
            _raise(signum, frame)
        self.signum = signum

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted(self.signum, at_boundary=True)


@contextlib.contextmanager
def deferred(enabled: bool = True) -> Iterator[Deferred]:
    """While active, the first SIGINT/SIGTERM waits for `check()`; the old handlers return
    on exit. With `enabled=False` (or off the main thread) nothing is installed."""
    flag = Deferred()
    if not (enabled and _on_main_thread()):
        yield flag
        return
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    for signum in SIGNALS:
        signal.signal(signum, flag.handle)
    try:
        yield flag
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def before_steps(argv: list[str]) -> str:
    """The line of a run stopped before its first step (loading, compiling), read from its
    command line `argv`; '' for a launched process other than process 0 (which speaks for
    the run: an async worker, stopped at any time, would say it on every Ctrl-C)."""
    from omnilearn_jax.config.errors import flag_values
    from omnilearn_jax.run.runstore import last_checkpoint_step

    def last(name: str, default: str) -> str:
        return (flag_values(argv, name) or [default])[-1].strip().lower()

    if last("config.distributed.process_id", "0") not in ("0", "-1"):
        return ""
    workdir = last("workdir", "")
    resume = last("config.train.resume", "true") not in ("false", "0")
    step = last_checkpoint_step(workdir) if workdir and resume else None
    then = f"resume from its step {step}" if step else "start" if resume else "start afresh"
    return (
        f"interrupted before the first step (loading or compiling); run the same command "
        f"again to {then}"
    )


def stop_message(step: int, num_steps: int, resume_step: int | None, unit: str = "step") -> str:
    """The one line a stopped run prints."""
    if resume_step:
        then = f"run the same command again to resume from {unit} {resume_step}"
    else:
        then = "no checkpoint yet: running the same command again starts from the beginning"
    return f"interrupted at {unit} {step}/{num_steps}; {then}"
