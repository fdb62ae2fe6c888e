"""The worker processes of a multi-process test: started together and, whatever happens, joined
(or killed by their own handles when they outlive the timeout), so no test leaves one behind."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event


@contextmanager
def started(processes: Sequence[BaseProcess], timeout: float) -> Iterator[None]:
    """Start ``processes``; on leaving, join each for up to ``timeout`` seconds and kill it if
    it is still alive."""
    for process in processes:
        process.start()
    try:
        yield
    finally:
        for process in processes:
            process.join(timeout)
            if process.is_alive():
                process.kill()  # by its own handle


@contextmanager
def stopping(stop: Event) -> Iterator[None]:
    """Set ``stop`` (the workers' signal to finish) on leaving, whatever happens."""
    try:
        yield
    finally:
        stop.set()
