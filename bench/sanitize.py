"""The sanitizer's cost per 4 KiB error (``make bench SECTION=sanitize``).

Every failure's error and every heartbeat's message passes ``sanitize_error``. Three texts of 4
KiB: a traceback without credentials, the same with credentials in several notations, and a
worst case (short lines of four secrets each, quoted and not, one name in look-alikes, which
takes the folding path). CPU time of this thread, best of five rounds; the floor is one pass of
one regular expression over the same text, the least a text-reading step costs.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path

from app.queue.rules.sanitize import sanitize_error

SIZE = 4096
ROUNDS = 5
CALLS = 200

_FRAME = (
    'File "/srv/app/jobs/{name}.py", line {line}, in run\n'
    "    response = client.post(url, json=payload, timeout=10)\n"
)
_SECRETS = (
    "PGPASSWORD=Zr4tYu8Ws1 psql -h db\n"
    "headers={'Authorization': 'Bearer Gt5rFe4Dw3Sq'}\n"
    'user = {:password=>"Rb1hRk4Sy7", :name=>"bob"}\n'
    "could not connect: postgresql://app:Pg1dSn4pW7@db:5432/prod\n"
    "docker login -u bob -p Dp1lOg4iN7 ghcr.io\n"
)
_WORST = "p\u0430ssword\uff1d'x1' token: \"y2\" --secret z3 api_key=w4\n"


def _fill(piece: Callable[[int], str]) -> str:
    """Pieces appended until the text holds SIZE bytes, cut there."""
    text = ""
    n = 0
    while len(text.encode()) < SIZE:
        text += piece(n)
        n += 1
    return text.encode()[:SIZE].decode("utf-8", "ignore")


TEXTS = {
    "traceback, no credentials": _fill(lambda n: _FRAME.format(name=f"task{n}", line=n)),
    "traceback with credentials": _fill(
        lambda n: _SECRETS if n % 4 == 0 else _FRAME.format(name=f"task{n}", line=n)
    ),
    "worst case: names and look-alikes": _fill(lambda n: _WORST),
}
_FLOOR = re.compile(r"\S+")


def _microseconds(call: Callable[[], object]) -> float:
    """CPU microseconds per call, best of ROUNDS rounds of CALLS calls."""
    best = float("inf")
    for _ in range(ROUNDS):
        started = time.thread_time()
        for _ in range(CALLS):
            call()
        best = min(best, time.thread_time() - started)
    return best / CALLS * 1e6


def run(_: Path) -> None:
    """Print the microseconds per 4 KiB text, with the floor's."""
    print("sanitize_error per 4 KiB text (CPU time, best of 5 rounds of 200):")
    for name, text in TEXTS.items():
        cost = _microseconds(lambda text=text: sanitize_error(text, SIZE))  # type: ignore[misc]
        floor = _microseconds(lambda text=text: _FLOOR.findall(text))  # type: ignore[misc]
        print(f"  {name:<40} {cost:>8.0f} us   floor {floor:>5.0f} us   ratio {cost / floor:6.1f}")
