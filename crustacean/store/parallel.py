"""Waiting on the disk in parallel.

fsync releases the GIL, and a filesystem commits the fsyncs in flight together, so a call's
files synced at once cost about one fsync instead of one each. Threads are started with the
low-level `_thread` API: `threading.Thread.start` waits until the new thread has been scheduled,
which on a loaded machine costs more than the fsync it was meant to hide.
"""

from __future__ import annotations

import _thread
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
LANES = 8  # threads at most that wait on the disk for one call


def start(fn: Callable[[], object]) -> Callable[[], None]:
    """Run `fn` on a new thread now; the returned call waits for it and raises its error
    (once). Callers always wait before they return, so no thread outlives its work."""
    done = _thread.allocate_lock()
    done.acquire()
    failure: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # raised where the caller waits
            failure.append(e)
        finally:
            done.release()

    _thread.start_new_thread(run, ())

    def wait() -> None:
        with done:
            pass
        if failure:
            raise failure.pop()

    return wait


def all_at_once(
    jobs: list[Callable[[], T]], *, keep_going: bool = False, stop_early: bool = False
) -> list[T | BaseException]:
    """Run `jobs` on up to LANES threads (this one included) and wait for every one. The
    first error is raised once all have ended, or, with `keep_going`, a job's error is its
    result. With `stop_early` no job starts once one has failed (the jobs already running
    finish; the slots of those never started hold None)."""
    results: list[T | BaseException] = [None] * len(jobs)  # type: ignore[list-item]  # every slot is filled by its job before it is read
    order = iter(range(len(jobs)))
    take = _thread.allocate_lock()
    failed: list[bool] = []

    def work() -> None:
        while True:
            with take:
                i = None if failed else next(order, None)
            if i is None:
                return
            try:
                results[i] = jobs[i]()
            except BaseException as e:  # handed to the caller below
                results[i] = e
                if stop_early:
                    failed.append(True)

    waits = [start(work) for _ in range(min(LANES, (len(jobs) + 1) // 2) - 1)]
    try:
        work()
    finally:
        for wait in waits:
            wait()
    if not keep_going:
        for r in results:
            if isinstance(r, BaseException):
                raise r
    return results
