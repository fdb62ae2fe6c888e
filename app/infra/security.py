"""Browser protections: safe response headers, a session cookie that is ``Secure`` and
``__Host-`` prefixed over HTTPS, and cross-site form posts refused."""

from __future__ import annotations

from flask import Flask, Response, abort, request
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

API_ROOTS = ("/jobs", "/groups", "/schedules", "/types", "/metrics", "/audit")
_API_PREFIXES = tuple(f"{root}/" for root in API_ROOTS)


def is_api_path(path: str) -> bool:
    """True for the JSON API's routes, which authenticate by bearer token only."""
    return path in API_ROOTS or path.startswith(_API_PREFIXES)


# Set on every response that does not set them itself (in this order).
SAFE_HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "strict-origin-when-cross-origin"),
    ("X-Frame-Options", "DENY"),
    # A window this site opens, or that opens it, gets no handle on the other (no
    # window.opener tricks, no cross-window leaks).
    ("Cross-Origin-Opener-Policy", "same-origin"),
)
# Subdomains too: a plain-HTTP subdomain could otherwise set cookies for this host's domain.
HSTS = ("Strict-Transport-Security", "max-age=31536000; includeSubDomains")
HOST_PREFIX = "__Host-"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


class SessionInterface(SecureCookieSessionInterface):
    """No session at all on API routes; elsewhere the cookie is Secure over HTTPS, and named
    ``__Host-session`` there so the browser binds it to this exact host (no Domain, Path=/,
    Secure). Plain HTTP (development) keeps the unprefixed name."""

    def get_cookie_name(self, app: Flask) -> str:
        name = super().get_cookie_name(app)
        return HOST_PREFIX + name if request.is_secure else name

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

    @app.before_request
    def refuse_cross_site_posts() -> None:
        """Defence in depth beside the CSRF token: a cookie-authenticated write whose Origin
        is another site, or that the browser marks cross-site, is refused."""
        if request.method not in UNSAFE_METHODS or is_api_path(request.path):
            return
        origin = request.headers.get("Origin")
        if origin is not None and origin != request.host_url.rstrip("/"):
            abort(403, "Cross-origin form posts are refused.")
        if request.headers.get("Sec-Fetch-Site") == "cross-site":
            abort(403, "Cross-site form posts are refused.")

    @app.after_request
    def security_headers(response: Response) -> Response:
        headers = response.headers
        # One pass over the headers the response has (setdefault would rescan them per name).
        present = {name.lower() for name, _ in headers.items()}
        wanted = (*SAFE_HEADERS, HSTS) if request.is_secure else SAFE_HEADERS
        headers.extend([(name, value) for name, value in wanted if name.lower() not in present])
        if request.endpoint != "static":
            headers["Cache-Control"] = "no-store"
        return response
