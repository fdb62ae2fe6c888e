"""Production entry point of ``make serve``: granian serves ``rsgi:app`` (see ``serve.py``).

The same Flask app as ``wsgi:app``, behind the bridge that reads request bodies on granian's
event loop with a deadline before a thread runs the app (``app.serving``).
"""

import os
from pathlib import Path

from app import create_app
from app.serving import Heartbeat, WSGIBridge

flask_app = create_app({"PRODUCTION": True})
_beats = os.environ.get("QUEUELOG_HEARTBEAT_DIR")
app = WSGIBridge(
    flask_app,
    threads=flask_app.config["SERVER_THREADS"],  # QUEUELOG_THREADS, as the app bounds waits by it
    body_timeout=float(os.environ.get("QUEUELOG_BODY_TIMEOUT", "30")),
    max_body=flask_app.config["MAX_CONTENT_LENGTH"],
    heartbeat=Heartbeat(Path(_beats)) if _beats else None,
)
