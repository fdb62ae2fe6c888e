"""The HTTP floor of ``make bench``: a Flask app whose JSON routes do nothing, served by the
same server configuration as queuelog (``app`` under gunicorn, ``rsgi_app`` under ``make
serve``'s granian and its bridge), so a ratio to it is queuelog's own cost per call."""

from __future__ import annotations

from flask import Flask, Response, jsonify, request

from app.serving import WSGIBridge

app = Flask(__name__)


@app.get("/noop")
def read() -> Response:
    """A JSON answer, nothing else."""
    return jsonify({"ok": True})


@app.post("/noop")
def write() -> Response:
    """Read the JSON body, answer JSON."""
    return jsonify({"ok": True, "keys": len(request.get_json())})


rsgi_app = WSGIBridge(app, threads=32, body_timeout=30, max_body=1_048_576)
