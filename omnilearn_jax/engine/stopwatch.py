"""Per-device compute times of launches made one at a time (an async worker's gradient):
each from its launch until its result is ready, stamped by a waiter thread a device.

A launch is asynchronous, so the host goes on (launching other workers, applying pushes)
while the device computes; the waiter blocks on the result and stamps its end. Handing a
waiter work costs a queue's put. (A BSP step launches every device at once and times them
together: `Steps.run_local`.)
"""

from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import Future


class Stopwatch:
    """`start(k)` before device k's launch, `stop_when_ready(k, output)` after it; then
    `seconds(k)` (waits) or `elapsed(k)` (so far)."""

    def __init__(self):
        self.waiters: list[queue.SimpleQueue] = []
        self.threads: list[threading.Thread] = []
        self.times: dict[int, Future] = {}  # k -> its measured seconds
        self.clocks: dict[int, list[float]] = {}  # k -> [launch, end]
        self.lock = threading.Lock()  # the clocks' reads and writes: see `elapsed`

    def start(self, k: int) -> None:
        with self.lock:
            self.clocks[k] = [time.perf_counter()]

    def stop_when_ready(self, k: int, output) -> Future:
        """The future of k's compute seconds, from `start(k)` until `output` (an array of
        its launch) is ready."""
        future = self.times[k] = Future()
        self._waiter(k).put((future, output))
        return future

    def _waiter(self, k: int) -> queue.SimpleQueue:
        """Device k's waiter: a thread, started at its first launch."""
        while len(self.waiters) <= k:
            inbox: queue.SimpleQueue = queue.SimpleQueue()
            j = len(self.waiters)
            thread = threading.Thread(target=self._wait, args=(j, inbox), daemon=True)
            thread.start()
            self.threads.append(thread)
            self.waiters.append(inbox)
        return self.waiters[k]

    def _wait(self, k: int, inbox: queue.SimpleQueue) -> None:
        while (item := inbox.get()) is not None:
            future, ready = item
            try:
                ready.block_until_ready()
                with self.lock:
                    end = time.perf_counter()
                    self.clocks[k].append(end)
                future.set_result(end - self.clocks[k][0])
            except Exception as err:  # noqa: BLE001 - raised where the time is read
                future.set_exception(err)

    def elapsed(self, k: int) -> float:
        """k's compute seconds so far (0 before its launch), never more than it will
        measure: the clock is read under the lock its end is taken under, so a compute not
        yet seen to end ends after this reading."""
        with self.lock:
            now = time.perf_counter()
            clocks = list(self.clocks.get(k, ()))
        if not clocks:
            return 0.0
        return (clocks[1] if len(clocks) > 1 else now) - clocks[0]

    def seconds(self, k: int) -> float:
        """k's measured compute seconds (waits for it)."""
        return self.times[k].result()

    def forget(self, k: int) -> None:
        self.times.pop(k, None)

    def close(self, timeout: float = 30.0) -> None:
        """Stops the waiters and waits until each has ended: one still inside a launch's
        `block_until_ready` when the interpreter shuts down (the last push of an async run
        may still be computing) returns into a finalising Python from C++ code and aborts
        the process."""
        for inbox in self.waiters:
            inbox.put(None)
        for thread in self.threads:
            thread.join(timeout)
        self.waiters, self.threads = [], []
