"""An answer's response model as the Flask response: pydantic's serializer writes it, for the
caller who asked (what only admins see is left out for anyone else, here and nowhere else)."""

from __future__ import annotations

from flask import Response, current_app, g

from app.infra.jsonwire import indented
from app.queue.contract.job_responses import ResponseModel, hidden_from_others
from app.queue.rules import policy


def respond(answer: ResponseModel, status: int = 200) -> Response:
    """``answer`` as JSON: the fields it was given, in their order, compact UTF-8 ending in a
    newline, as ``app.infra.jsonwire`` writes every other answer (indented in debug mode, for
    people). Error texts are sent only to callers the policy lets read them.
    pydantic's serializer writes any integer, so no answer needs another encoder."""
    indent = 2 if indented(current_app) else None
    viewer = g.get("actor")
    hidden = None if viewer and policy.sees_errors(viewer) else hidden_from_others(type(answer))
    body = answer.__pydantic_serializer__.to_json(
        answer, indent=indent, exclude_unset=True, exclude=hidden
    )
    return Response(body + b"\n", status, mimetype="application/json")
