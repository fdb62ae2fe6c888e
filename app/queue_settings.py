"""What the queue's use cases take from the current app: its queue settings (leases, backoff,
limits), built once from its Flask config (read in ``app/config.py``), and this process's memory
of the type polls it noted (``app.queue.domain.polls``)."""

from __future__ import annotations

from datetime import timedelta

from flask import Flask, current_app

from app.queue.domain.models import QueueSettings
from app.queue.domain.polls import PollNotes

EXTENSION_KEY = "queuelog.settings"
POLLS_KEY = "queuelog.polls"
# A worker that keeps asking is noted at least this often within the explainer's idle window.
NOTES_PER_IDLE_WINDOW = 10


def init_app(app: Flask) -> None:
    """Read the queue settings from the app config; start the process's poll notes."""
    app.extensions[EXTENSION_KEY] = QueueSettings.from_config(app.config)
    idle = timedelta(seconds=app.config["EXPLAIN_IDLE_WORKER_SECONDS"])
    app.extensions[POLLS_KEY] = PollNotes(idle / NOTES_PER_IDLE_WINDOW)


def queue_settings() -> QueueSettings:
    """The current app's queue settings."""
    return current_app.extensions[EXTENSION_KEY]  # type: ignore[no-any-return]


def poll_notes() -> PollNotes:
    """This process's memory of the type polls it noted."""
    return current_app.extensions[POLLS_KEY]  # type: ignore[no-any-return]
