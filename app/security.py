"""Response headers that keep browsers safe, and session cookies that are Secure over HTTPS."""

from __future__ import annotations

from flask import Flask, Response, request
from flask.sessions import SecureCookieSession, SecureCookieSessionInterface
from flask.wrappers import Request
from werkzeug.middleware.proxy_fix import ProxyFix

CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)

API_ROOTS = ("/jobs", "/schedules")


def is_api_path(path: str) -> bool:
    """True for the JSON API's routes, which authenticate by bearer token only."""
    return any(path == root or path.startswith(f"{root}/") for root in API_ROOTS)


class SessionInterface(SecureCookieSessionInterface):
    """No session at all on API routes; elsewhere the cookie is Secure over HTTPS."""

    def open_session(self, app: Flask, request: Request) -> SecureCookieSession | None:
        if is_api_path(request.path):
            return self.make_null_session(app)
        return super().open_session(app, request)

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or request.is_secure


def init_app(app: Flask) -> None:
    """Install the session interface, proxy handling and the header hook."""
    app.session_interface = SessionInterface()
    hops = int(app.config.get("TRUSTED_PROXIES", 0))
    if hops:
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=hops, x_proto=hops, x_host=hops)  # type: ignore[method-assign]

    @app.after_request
    def security_headers(response: Response) -> Response:
        headers = response.headers
        headers.setdefault("Content-Security-Policy", CONTENT_SECURITY_POLICY)
        headers.setdefault("X-Content-Type-Options", "nosniff")
        headers.setdefault("Referrer-Policy", "strict-origin-when-cross-origin")
        headers.setdefault("X-Frame-Options", "DENY")
        if request.is_secure:
            headers.setdefault("Strict-Transport-Security", "max-age=31536000")
        if request.endpoint != "static":
            headers["Cache-Control"] = "no-store"
        return response
