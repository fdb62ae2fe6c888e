"""Sign in and sign out. Failed logins are rate limited and never say whether the user exists."""

from __future__ import annotations

from typing import Any

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
from werkzeug.wrappers import Response

from app.accounts import second_factor
from app.accounts import service as accounts
from app.accounts.models import User
from app.audit import store as audit_store
from app.audit.actions import AuditAction
from app.infra import access, db
from app.infra.secretbox import current_box
from app.queue.rules.policy import Action, can, what
from app.queue.vocabulary.timeutil import utcnow
from app.web import audited
from app.web.forms import CodeForm, LoginForm
from app.web.login import LOGIN_AT, SessionUser
from app.web.redirects import safe_next
from app.web.throttle import client_address, login_throttle, refusal

bp = Blueprint("auth", __name__)
LOGIN_FAILED = "Invalid user name or password."
CODE_FAILED = "Invalid or already used code."
PENDING = "pending_login"  # session key: the user whose password passed, awaiting the code
PENDING_SECONDS = 300


def _sign_in(user: User, next_page: str | None, **details: Any) -> Response:
    """Start the signed-in session. A new session for the new identity: nothing from before
    the login survives (no fixation), and the login time makes the session "fresh"."""
    session.clear()
    login_user(SessionUser(user), fresh=True)
    session[LOGIN_AT] = utcnow().timestamp()
    session.permanent = True
    audited.record_alone(AuditAction.SIGN_IN, f"user:{user.name}", **details)
    return redirect(safe_next(next_page))


def _ask_for_code(user: User) -> Response:
    """The password was right and the user has a second factor: remember who (for a few
    minutes, in a new session) and ask for the code."""
    next_page = request.args.get("next")
    session.clear()
    session[PENDING] = {"user": accounts.session_id(user), "at": utcnow().timestamp()}
    return redirect(url_for(".second_factor", next=next_page))


def _pending_user() -> User | None:
    """The user whose password was checked in this session moments ago, if still valid."""
    pending = session.get(PENDING)
    if not isinstance(pending, dict) or not isinstance(pending.get("at"), int | float):
        return None
    if not 0 <= utcnow().timestamp() - pending["at"] <= PENDING_SECONDS:
        return None
    with db.read() as conn:
        return accounts.user_for_session(conn, str(pending.get("user", "")))


@bp.route("/login/code", methods=["GET", "POST"], endpoint="second_factor")
@access.mark(access.PUBLIC)  # the second step of signing in
def second_factor_step() -> Response | tuple[str, int]:
    """The second step of signing in: a code from the authenticator app or a recovery code.
    Codes count against the same per-address and per-account limits as passwords."""
    user = _pending_user()
    if user is None:
        session.pop(PENDING, None)
        return redirect(url_for(".login"))
    form = CodeForm()
    status = 200
    if form.validate_on_submit():
        throttle, address = login_throttle(), client_address()
        if (retry_after := throttle.attempt(address, user.name)) is not None:
            raise refusal(retry_after)
        now = utcnow()
        with db.transaction() as conn:
            method = second_factor.verify(conn, user, current_box(), form.code.data, now=now)
            if method is second_factor.Method.RECOVERY_CODE:
                left = second_factor.unused_recovery_codes(conn, user)
                used = AuditAction.RECOVERY_CODE_USED
                target = f"user:{user.name}"
                audit_store.record(conn, audited.origin(), used, target, at=now, left=left)
        if method is not None:
            throttle.succeeded(address, user.name)
            return _sign_in(user, request.args.get("next"), second_factor=method.value)
        form.form_errors.append(CODE_FAILED)
        audited.record_alone(AuditAction.SIGN_IN_FAILED, f"user:{user.name}", step="code")
        status = 401
    elif request.method == "POST":
        status = 422
    return render_template("auth/code.html", form=form), status


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | tuple[str, int]:
    form = LoginForm()
    status = 200
    if form.validate_on_submit():
        throttle, address = login_throttle(), client_address()
        if (retry_after := throttle.attempt(address, form.username.data)) is not None:
            raise refusal(retry_after)
        with db.read() as conn:
            user = accounts.authenticate_password(conn, form.username.data, form.password.data)
        if user is not None and not can(user.actor(), Action.SIGN_IN):
            # The password was right: say why there is no page for this role.
            throttle.succeeded(address, form.username.data)
            form.form_errors.append(f"The {user.role} role may not {what(Action.SIGN_IN)}.")
            audited.record_alone(AuditAction.SIGN_IN_FAILED, f"user:{user.name}", step="role")
            return render_template("auth/login.html", form=form), 403
        if user is not None:
            throttle.succeeded(address, form.username.data)
            with db.read() as conn:
                needs_code = second_factor.is_enrolled(conn, user)
            if needs_code:
                return _ask_for_code(user)
            return _sign_in(user, request.args.get("next"))
        form.form_errors.append(LOGIN_FAILED)
        audited.record_alone(AuditAction.SIGN_IN_FAILED, f"user:{form.username.data}")
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
            target = f"user:{current_user.user.name}"
            audit_store.record(conn, audited.origin(), AuditAction.SIGN_OUT, target, at=utcnow())
        logout_user()
    session.clear()
    flash("You are signed out.", "info")
    return redirect(url_for("web.auth.login"))
