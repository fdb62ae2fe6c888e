"""Sign in and sign out. Failed logins are rate limited and never say whether the user exists."""

from __future__ import annotations

from flask import (
    Blueprint,
    flash,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_login import current_user, login_user, logout_user
from werkzeug.exceptions import TooManyRequests
from werkzeug.wrappers import Response

from app import db
from app.accounts import service as accounts
from app.accounts.login import LOGIN_AT, SessionUser
from app.timeutil import utcnow
from app.web.forms import LoginForm
from app.web.redirects import safe_next
from app.web.throttle import login_throttle

bp = Blueprint("auth", __name__)
LOGIN_FAILED = "Invalid user name or password."


def _refuse(retry_after: int) -> TooManyRequests:
    refusal = TooManyRequests("Too many sign-in attempts; try again later.")
    refusal.retry_after = retry_after
    return refusal


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | tuple[str, int]:
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        throttle, address = login_throttle(), request.remote_addr or ""
        if (retry_after := throttle.attempt(address, form.username.data)) is not None:
            raise _refuse(retry_after)
        with db.read() as conn:
            user = accounts.authenticate_password(conn, form.username.data, form.password.data)
        if user is not None:
            throttle.succeeded(address, form.username.data)
            # A new session for the new identity: nothing from before the login survives
            # (no fixation), and the login time makes the session "fresh" for role changes.
            session.clear()
            login_user(SessionUser(user), fresh=True)
            session[LOGIN_AT] = utcnow().timestamp()
            session.permanent = True
            return redirect(safe_next(request.args.get("next")))
        form.form_errors.append(LOGIN_FAILED)
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
        logout_user()
    session.clear()
    flash("You are signed out.", "info")
    return redirect(url_for("web.auth.login"))
