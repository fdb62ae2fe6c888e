"""HTML routes."""

from __future__ import annotations

from flask import Blueprint, redirect
from werkzeug.wrappers import Response

bp = Blueprint("web", __name__)


@bp.get("/")
def index() -> Response:
    return redirect("/ui/")
