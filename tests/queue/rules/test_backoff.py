"""Backoff is a pure function: exponential window, full jitter, capped."""

from __future__ import annotations

import random

import pytest

from app.queue.rules.backoff import backoff_seconds


def upper(low: float, high: float) -> float:
    """A 'random' source that always picks the top of the window."""
    return high


def test_window_doubles_from_base() -> None:
    windows = [backoff_seconds(r, base=10, cap=10_000, uniform=upper) for r in range(1, 6)]
    assert windows == [10, 20, 40, 80, 160]


def test_window_is_capped() -> None:
    assert backoff_seconds(20, base=10, cap=3600, uniform=upper) == 3600
    assert backoff_seconds(10**9, base=10, cap=3600, uniform=upper) == 3600


def test_full_jitter_draws_from_zero_to_the_window() -> None:
    calls: list[tuple[float, float]] = []

    def record(low: float, high: float) -> float:
        calls.append((low, high))
        return (low + high) / 2

    assert backoff_seconds(3, base=5, cap=100, uniform=record) == 10
    assert calls == [(0.0, 20)]


@pytest.mark.parametrize("retry", [0, -5])
def test_out_of_range_retry_numbers_use_the_base_window(retry: int) -> None:
    assert backoff_seconds(retry, base=7, cap=100, uniform=upper) == 7


def test_zero_or_negative_settings_never_give_negative_delays() -> None:
    assert backoff_seconds(4, base=0, cap=100, uniform=upper) == 0
    assert backoff_seconds(4, base=10, cap=-1, uniform=upper) == 0


def test_real_randomness_stays_within_the_window() -> None:
    rng = random.Random(1234)
    for retry in range(1, 30):
        window = min(600, 2 * 2 ** (retry - 1))
        delay = backoff_seconds(retry, base=2, cap=600, uniform=rng.uniform)
        assert 0 <= delay <= window
