"""Counting XLA compilations, to prove that a new batch split never recompiles."""

from __future__ import annotations

import jax.monitoring

_EVENT = "/jax/core/compile/backend_compile_duration"


class CompileCounter:
    """Context manager counting backend compilations made while it is active."""

    def __init__(self):
        self.count = 0

    def _listen(self, event: str, duration: float, **kwargs) -> None:
        if event == _EVENT:
            self.count += 1

    def __enter__(self) -> CompileCounter:
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self

    def __exit__(self, *exc) -> None:
        jax.monitoring.unregister_event_duration_listener(self._listen)
