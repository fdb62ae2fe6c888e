"""queuelog: a persistent background-job queue served by Flask."""

from __future__ import annotations

from typing import Any

from flask import Flask


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build the app: configuration, extensions, blueprints, error handlers, CLI. Nothing else.

    ``config`` overrides every other source; its ``INSTANCE_PATH`` (absolute) moves the instance
    folder (config.toml, the default database file, the development key) elsewhere.
    """
    app = Flask(
        __name__,
        instance_path=(config or {}).get("INSTANCE_PATH"),
        instance_relative_config=True,
    )  # its templates/ and static/: links to the repository's folders, copied into a wheel
    from app import config as app_config
    from app.accounts import passwords
    from app.api import admission, dispatcher
    from app.api import routes as api_routes
    from app.api.docs import bp as apidocs_bp
    from app.cli import commands
    from app.extensions import csrf, limiter
    from app.infra import (
        bodylimit,
        db,
        errors,
        housekeeper,
        queue_settings,
        ratelimit,
        secretbox,
        security,
    )
    from app.infra.jsonwire import OrjsonProvider
    from app.infra.routing import RowIdConverter
    from app.monitoring import health, http
    from app.web import login, throttle
    from app.web.views import bp as web_bp

    app_config.load_config(app, config)
    app.json = OrjsonProvider(app)
    app.url_map.converters["id"] = RowIdConverter
    http.init_app(app)
    db.init_app(app)
    queue_settings.init_app(app)
    housekeeper.init_app(app)
    admission.init_app(app)
    dispatcher.init_app(app)
    csrf.init_app(app)
    ratelimit.init_app(app)
    limiter.init_app(app)
    throttle.init_app(app)
    secretbox.init_app(app)
    login.init_app(app)
    passwords.init_app(app)
    security.init_app(app)
    bodylimit.init_app(app)
    # No API route reads the session cookie (bearer tokens only), so none needs a CSRF token;
    # Flask-WTF exempts blueprint by blueprint.
    for blueprint in (api_routes.bp, *api_routes.ROUTES):
        csrf.exempt(blueprint)
    # Each route module owns a blueprint; the API's and the pages' hold their modules' ones.
    for blueprint in (api_routes.bp, web_bp, health.bp, apidocs_bp):
        app.register_blueprint(blueprint)
    errors.init_app(app)
    commands.init_app(app)
    return app
