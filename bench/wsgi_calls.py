"""The calls of ``bench.http_calls``, made in one process on the WSGI apps themselves: the CPU
time of each call against the no-op app's, with no gunicorn, socket or client in between.

Through gunicorn every request also pays the server's own work, which the floor pays too; these
figures say how much of a call's cost is queuelog's (its hooks, its transaction, its SQL, its
answer), and they move far less with a noisy machine than rates through a server do. Each call's
WSGI environ is built before the clock starts; the best of the rounds is shown.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from werkzeug.test import EnvironBuilder

from bench import noop_app
from bench.http_calls import NAMES, Call, Round, floor_call
from devservers.servers import app_settings, prepare_database

WSGIApp = Callable[..., Any]


def _environ(token: str | None, call: Call) -> dict[str, Any]:
    method, path, body = call
    headers = [("Authorization", f"Bearer {token}")] if token else []
    builder = EnvironBuilder(path=path, method=method, json=body, headers=headers)
    try:
        return builder.get_environ()
    finally:
        builder.close()


def cpu_per_call(
    app: WSGIApp, token: str | None, calls: Sequence[Call], expect: int
) -> tuple[float, list[Any]]:
    """Make every call once; CPU seconds per call and the answers. An answer other than
    ``expect`` stops the bench, as through gunicorn."""
    environs = [_environ(token, call) for call in calls]
    statuses: list[str] = []
    bodies: list[bytes] = []

    def start_response(status: str, _headers: Any, _exc_info: Any = None) -> None:
        statuses.append(status)

    began = time.process_time()
    for environ in environs:
        answer = app(environ, start_response)
        bodies.append(b"".join(answer))
        getattr(answer, "close", lambda: None)()
    elapsed = time.process_time() - began
    for call, status, body in zip(calls, statuses, bodies, strict=True):
        if not status.startswith(str(expect)):
            raise RuntimeError(f"{call[:2]} answered {status}: {body[:200]!r}")
    return elapsed / len(calls), [json.loads(body) for body in bodies]


class InProcessRound(Round):
    """One round of ``Round.run``'s calls, each timed right after the floor of its method."""

    def __init__(self, app: WSGIApp, tokens: dict[str, str], count: int) -> None:
        super().__init__(tokens, count)
        self.app = app

    def pair(self, name: str, token: str, calls: Sequence[Call], expect: int) -> list[Any]:
        floor, _ = cpu_per_call(noop_app.app, None, [floor_call(name)] * len(calls), 200)
        cost, answers = cpu_per_call(self.app, self.tokens[token], calls, expect)
        self.rates[name] = (1 / cost, 1 / floor)  # calls per CPU second
        return answers


def run(base: Path, rounds: int, count: int) -> None:
    """Print each call's best CPU time per call beside the floor's, and their ratio."""
    from app import create_app  # here, like the server's import: after the bench's setup

    database = prepare_database(base / "db", {"p": "producer", "w": "worker"})
    app = create_app({**app_settings(database), "PRODUCTION": True})
    measured = [InProcessRound(app, database.tokens, count).run() for _ in range(rounds)]
    print(
        f"in one process (the WSGI apps called directly, SQLite FULL; CPU per call, best of "
        f"{rounds} rounds of {count}; floor = the no-op app's call of the same method):"
    )
    for name in NAMES:
        cost = 1 / max(m[name][0] for m in measured)
        floor = 1 / max(m[name][1] for m in measured)
        print(
            f"  {name:<40} {cost * 1e3:6.3f} ms   floor {floor * 1e3:5.3f} ms"
            f"   ratio {floor / cost:5.2f}"
        )
