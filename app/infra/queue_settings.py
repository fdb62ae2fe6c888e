"""The queue settings (leases, backoff, limits) of the current app, built once from its
Flask config; the config itself is read in ``app/config.py``."""

from __future__ import annotations

from flask import Flask, current_app

from app.queue.vocabulary.models import QueueSettings

EXTENSION_KEY = "queuelog.settings"


def init_app(app: Flask) -> None:
    """Read the queue settings from the app config."""
    app.extensions[EXTENSION_KEY] = QueueSettings.from_config(app.config)


def queue_settings(app: Flask | None = None) -> QueueSettings:
    """The queue settings of ``app`` (or the current app)."""
    return (app or current_app).extensions[EXTENSION_KEY]  # type: ignore[no-any-return]
