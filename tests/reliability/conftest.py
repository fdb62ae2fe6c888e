"""Fixtures of the reliability tests; the harness itself is ``tests.harness``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from flask import Flask

from tests.harness import Agents, Queue, make_queue


@pytest.fixture
def agents() -> Iterator[Agents]:
    spawned = Agents()
    yield spawned
    spawned.kill_all()


@pytest.fixture
def queue(app: Flask) -> Queue:
    return make_queue(app)
