"""What the queue's use cases take from the current app: its queue settings (leases, backoff,
limits), built once from its Flask config (read in ``app/config.py``), and this process's memory
of the type polls it noted (``app.queue.usecases.type_polls``)."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, current_app

from app.queue.rules.settings import QueueSettings
from app.queue.usecases.type_polls import PollNotes

EXTENSION_KEY = "queuelog.settings"
POLLS_KEY = "queuelog.polls"
# A worker that keeps asking is noted at least this often within the explainer's idle window.
NOTES_PER_IDLE_WINDOW = 10


def init_app(app: Flask) -> None:
    """Read the queue settings from the app config; start the process's poll notes."""
    app.extensions[EXTENSION_KEY] = QueueSettings.from_config(app.config)
    idle = timedelta(seconds=app.config["EXPLAIN_IDLE_WORKER_SECONDS"])
    app.extensions[POLLS_KEY] = PollNotes(idle / NOTES_PER_IDLE_WINDOW)


def queue_settings(app: Flask | None = None) -> QueueSettings:
    """The queue settings of ``app`` (or the current app)."""
    return (app or current_app).extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def poll_notes(app: Flask | None = None) -> PollNotes:
    """This process's memory of the type polls it noted (for ``app`` or the current app)."""
    return (app or current_app).extensions[POLLS_KEY]  # type: ignore[no-any-return]
