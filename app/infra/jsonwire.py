"""JSON that is not a response model (problems, the API document, health, ``tojson`` in
templates) encoded by orjson, as the response models are written (``app.api.respond``): compact,
in insertion order, text beyond ASCII as UTF-8 rather than as ``\\u`` escapes.

What orjson cannot write as the standard encoder would is handed to Flask's own provider:
integers beyond 64 bits, text that is not valid Unicode, keys that are not strings, and the
indented output of debug mode. Dates and dataclasses go to Flask's ``default``, as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import orjson
from flask.json.provider import DefaultJSONProvider

if TYPE_CHECKING:
    from flask.sansio.app import App
    from werkzeug.sansio.response import Response

_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def indented(app: App) -> bool:
    """Whether answers are indented for people: Flask's rule (the provider's ``compact``, or
    else debug mode). Every answer follows it, response models (``app.api.respond``) included."""
    compact = getattr(app.json, "compact", None)
    return compact is False or (compact is None and app.debug)


class OrjsonProvider(DefaultJSONProvider):
    """Flask's JSON provider, compact and insertion-ordered, with orjson doing the writing."""

    sort_keys = False  # keep the documented field order

    def _encoded(self, obj: Any) -> bytes | None:
        """``obj`` as compact JSON, or None where orjson would differ from the standard."""
        try:
            return orjson.dumps(obj, default=self.default, option=_OPTIONS)
        except TypeError:  # orjson.JSONEncodeError: a big integer, a surrogate, a non-str key
            return None

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if not kwargs:  # arguments ask for the standard encoder's options: it honours them
            encoded = self._encoded(obj)
            if encoded is not None:
                return encoded.decode()
        return super().dumps(obj, **kwargs)

    def response(self, *args: Any, **kwargs: Any) -> Response:
        if indented(self._app):
            return super().response(*args, **kwargs)
        encoded = self._encoded(self._prepare_response_obj(args, kwargs))
        if encoded is None:
            return super().response(*args, **kwargs)
        response_class: Any = self._app.response_class  # flask.Response, which takes bytes
        return response_class(encoded + b"\n", mimetype=self.mimetype)  # type: ignore[no-any-return]
