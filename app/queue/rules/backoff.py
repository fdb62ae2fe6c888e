"""The retry policy: exponential backoff with full jitter, as a pure function."""

from __future__ import annotations

from collections.abc import Callable

Uniform = Callable[[float, float], float]


def backoff_seconds(retry: int, *, base: float, cap: float, uniform: Uniform) -> float:
    """Seconds to wait before retry number ``retry`` (1 for the first retry).

    Full jitter (``uniform(0, min(cap, base * 2**(retry - 1)))``) spreads a burst of failures
    over the whole window instead of retrying them in lockstep.
    """
    exponent = min(max(retry - 1, 0), 62)  # 2**62 * base already exceeds any sane cap
    window = min(cap, base * (2**exponent))
    return uniform(0.0, max(window, 0.0))
