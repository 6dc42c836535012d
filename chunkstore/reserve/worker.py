"""The reserve's background thread: expiry, sweeps and capacity eviction, off the request path.

Like the reference node's reserve worker it runs once at start (so work a
crash interrupted resumes: an over-full reserve, a pending sweep, batches the
chain state expires), then whenever woken (a put that left the reserve over
capacity, a new chain state, a batch added or changed, a radius raised) and
every ``wakeup`` seconds, when it also steps the radius down if the reserve
is under half full within it.

Each pass is ``Reserve.maintain``: bounded write transactions, the writer
lock released between them, so uploads and samples go on. ``stop()`` ends
the thread after the step in progress; the store stops it before closing.
"""

from __future__ import annotations

import logging
import threading
import time

from chunkstore.store.errors import StoreWriteFailed

from .reserve import Reserve

log = logging.getLogger(__name__)

ERROR_BACKOFF = 5.0  # seconds before retrying after a failed pass


class ReserveWorker:
    def __init__(self, reserve: Reserve, *, wakeup: float | None = None) -> None:
        self.reserve = reserve
        self.wakeup = reserve.options.wakeup if wakeup is None else wakeup
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._requested = 0  # wakes asked for
        self._served = 0  # wakes covered by a finished pass
        self._thread: threading.Thread | None = None
        self.passes = 0
        self.errors = 0
        self.last_error: BaseException | None = None

    def start(self) -> ReserveWorker:
        if self._thread is None:
            self.reserve.attach(self.wake, self.stop)
            self._requested += 1  # the start-up pass
            self._thread = threading.Thread(target=self._run, name="reserve-worker", daemon=True)
            self._thread.start()
        return self

    def wake(self) -> None:
        with self._cond:
            self._requested += 1
            self._cond.notify_all()

    def stop(self, timeout: float | None = None) -> None:
        """Ask the thread to end after its current step, and wait for it."""
        self._stop.set()
        self.wake()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self.reserve.detach(self.stop)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def settle(self, timeout: float = 30.0) -> bool:
        """Wait until a pass has covered every wake asked for before this call; False on timeout."""
        with self._cond:
            want = self._requested
            return self._cond.wait_for(lambda: self._served >= want or not self.running, timeout)

    def _run(self) -> None:
        next_tick = time.monotonic() + self.wakeup
        while not self._stop.is_set():
            with self._cond:
                self._cond.wait_for(
                    lambda: self._requested > self._served or self._stop.is_set(),
                    max(0.0, next_tick - time.monotonic()),
                )
                want = self._requested
            if self._stop.is_set():
                break
            try:
                if time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + self.wakeup
                    if self.reserve.lower_radius_if_underpopulated():
                        log.info("reserve radius decrease", extra={"fields": {"radius": self.reserve.radius}})
                self.reserve.maintain(self._stop.is_set)
                self.passes += 1
            except StoreWriteFailed as exc:  # a full disk or map: expected, named, retried
                self.errors += 1
                self.last_error = exc
                log.warning("reserve worker pass failed: %s", exc)
                self._stop.wait(ERROR_BACKOFF)
            except Exception as exc:  # keep the daemon serving; the next wake or tick retries
                self.errors += 1
                self.last_error = exc
                log.exception("reserve worker pass failed")
                self._stop.wait(ERROR_BACKOFF)
            with self._cond:
                self._served = max(self._served, want)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()
