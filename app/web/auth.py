"""Sign in and sign out. Failed logins are rate limited and never say whether the user exists."""

from __future__ import annotations

from flask import (
    Blueprint,
    current_app,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_user, logout_user
from werkzeug.wrappers import Response

from app import db
from app.accounts import service as accounts
from app.accounts.login import LOGIN_AT, SessionUser
from app.audit import hooks as audit
from app.audit.actions import AuditAction
from app.extensions import limiter
from app.timeutil import utcnow
from app.web.forms import LoginForm
from app.web.htmx import safe_next

bp = Blueprint("auth", __name__)
LOGIN_FAILED = "Invalid user name or password."


def _login_limit() -> str:
    return str(current_app.config["LOGIN_RATE_LIMIT"])


def _failed(response: Response) -> bool:
    """Only failed attempts count against the limit; signing in works until it is reached."""
    return response.status_code == 401


@bp.route("/login", methods=["GET", "POST"])
@limiter.limit(_login_limit, methods=["POST"], deduct_when=_failed)
def login() -> Response | tuple[str, int]:
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        with db.read() as conn:
            user = accounts.authenticate_password(conn, form.username.data, form.password.data)
        if user is not None:
            # A new session for the new identity: nothing from before the login survives
            # (no fixation), and the login time makes the session "fresh" for role changes.
            session.clear()
            login_user(SessionUser(user), fresh=True)
            session[LOGIN_AT] = utcnow().timestamp()
            session.permanent = True
            audit.record_alone(AuditAction.SIGN_IN, f"user:{user.name}")
            return redirect(safe_next(request.args.get("next")))
        form.form_errors.append(LOGIN_FAILED)
        audit.record_alone(AuditAction.SIGN_IN_FAILED, f"user:{form.username.data}")
        status = 401
    elif request.method == "POST":
        status = 422
    return render_template("auth/login.html", form=form), status


@bp.post("/logout")
def logout() -> Response:
    """End every session of this user (a copied cookie stops working), then this one."""
    if current_user.is_authenticated:
        with db.transaction() as conn:
            accounts.end_sessions(conn, current_user.user)
            audit.record(conn, AuditAction.SIGN_OUT, f"user:{current_user.user.name}")
        logout_user()
    session.clear()
    flash("You are signed out.", "info")
    return redirect(url_for("web.auth.login"))
