"""The HTTP floor of ``make bench``: a Flask app whose JSON routes do nothing, served by the
same gunicorn configuration as queuelog, so a ratio to it is queuelog's own cost per call."""

from __future__ import annotations

from flask import Flask, Response, jsonify, request

app = Flask(__name__)


@app.get("/noop")
def read() -> Response:
    """A JSON answer, nothing else."""
    return jsonify({"ok": True})


@app.post("/noop")
def write() -> Response:
    """Read the JSON body, answer JSON."""
    return jsonify({"ok": True, "keys": len(request.get_json())})
