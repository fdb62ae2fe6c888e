"""An answer's response model as the Flask response: pydantic's serializer writes it."""

from __future__ import annotations

from flask import Response, current_app

from app.infra.jsonwire import indented
from app.queue.contract.job_responses import ResponseModel


def respond(answer: ResponseModel, status: int = 200) -> Response:
    """``answer`` as JSON: the fields it was given, in their order, compact UTF-8 ending in a
    newline, as ``app.infra.jsonwire`` writes every other answer (indented in debug mode, for
    people).
    pydantic's serializer writes any integer, so no answer needs another encoder."""
    indent = 2 if indented(current_app) else None
    body = answer.__pydantic_serializer__.to_json(answer, indent=indent, exclude_unset=True)
    return Response(body + b"\n", status, mimetype="application/json")
