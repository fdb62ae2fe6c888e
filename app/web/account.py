"""The signed-in user's own account: changing their password (the second factor has its own
module, ``app.web.second_factor``)."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, session, url_for
from flask_login import current_user, login_user
from werkzeug.wrappers import Response

from app.accounts import service as accounts
from app.accounts.errors import AccountError
from app.audit.actions import AuditAction
from app.infra import db
from app.queue.rules.policy import Action
from app.queue.vocabulary.timeutil import utcnow
from app.web import audited
from app.web.forms import PasswordChangeForm
from app.web.guard import current_actor, require_login, requires
from app.web.login import LOGIN_AT, SessionUser
from app.web.throttle import client_address, login_throttle, refusal

bp = Blueprint("account", __name__, url_prefix="/ui/account")
bp.before_request(require_login)


def _page(form: PasswordChangeForm, status: int = 200) -> tuple[str, int]:
    return render_template("account/password.html", form=form, me=current_actor()), status


@bp.route("/password", methods=["GET", "POST"])
@requires(Action.USE_ACCOUNT)
def password() -> Response | tuple[str, int]:
    """Current password required; every other session of the user ends, this one goes on.
    The current password is a password guess like a sign-in: it counts against the sign-in
    limits before it is checked, and each failure and success is audited."""
    form = PasswordChangeForm()
    if not form.validate_on_submit():
        return _page(form, 422 if form.is_submitted() else 200)
    user, throttle, address = current_user.user, login_throttle(), client_address()
    if (retry_after := throttle.attempt(address, user.name)) is not None:
        raise refusal(retry_after)
    target = f"user:{user.name}"
    try:
        with db.transaction() as conn:
            user = accounts.change_own_password(
                conn,
                user,
                form.current_password.data,
                form.new_password.data,
                now=utcnow(),
                origin=audited.origin(),
            )
    except AccountError as exc:
        if "current_password" in exc.errors:
            audited.record_alone(AuditAction.PASSWORD_CHANGE_FAILED, target)
        else:  # the current password was right: the attempt was no guess
            throttle.succeeded(address, user.name)
        for name, message in exc.errors.items():
            form[name].errors = [*form[name].errors, message]
        return _page(form, exc.status)
    throttle.succeeded(address, user.name)
    # The nonce rotated: re-issue this session under the new one, keeping its login time.
    login_at = session.get(LOGIN_AT)
    login_user(SessionUser(user))
    session[LOGIN_AT] = login_at
    flash("Password changed. Your other sessions have ended.", "success")
    return redirect(url_for("web.pages.dashboard"))
