"""The signed-in user's own account: changing their password."""

from __future__ import annotations

from flask import Blueprint, flash, redirect, render_template, session, url_for
from flask_login import current_user, login_user
from werkzeug.wrappers import Response

from app import db
from app.accounts import service as accounts
from app.accounts.errors import AccountError
from app.accounts.login import LOGIN_AT, SessionUser
from app.web.forms import PasswordChangeForm
from app.web.guard import current_actor, require_login

bp = Blueprint("account", __name__, url_prefix="/ui/account")
bp.before_request(require_login)


def _page(form: PasswordChangeForm, status: int = 200) -> tuple[str, int]:
    return render_template("account/password.html", form=form, me=current_actor()), status


@bp.route("/password", methods=["GET", "POST"])
def password() -> Response | tuple[str, int]:
    """Current password required; every other session of the user ends, this one goes on."""
    form = PasswordChangeForm()
    if not form.validate_on_submit():
        return _page(form, 422 if form.is_submitted() else 200)
    try:
        with db.transaction() as conn:
            user = accounts.change_own_password(
                conn, current_user.user, form.current_password.data, form.new_password.data
            )
    except AccountError as exc:
        for name, message in exc.errors.items():
            form[name].errors = [*form[name].errors, message]
        return _page(form, exc.status)
    # The nonce rotated: re-issue this session under the new one, keeping its login time.
    login_at = session.get(LOGIN_AT)
    login_user(SessionUser(user))
    session[LOGIN_AT] = login_at
    flash("Password changed. Your other sessions have ended.", "success")
    return redirect(url_for("web.pages.dashboard"))
