"""The signed-in user's second factor: turning it on (the pending secret waits encrypted in
the database, not in the cookie), turning it off and renewing the recovery codes. Each change
is audited; the last two need the password and a current code, and those count against the
sign-in limits like any password guess."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from flask import Blueprint, flash, redirect, render_template, url_for
from flask_login import current_user
from sqlalchemy import Connection
from werkzeug.wrappers import Response

from app.accounts import second_factor
from app.accounts import service as accounts
from app.accounts.errors import AccountError, WrongPasswordOrCode
from app.accounts.models import User
from app.audit import store as audit_store
from app.audit.actions import AuditAction
from app.infra import db
from app.infra.secretbox import current_box, require_box
from app.queue.rules.policy import Action
from app.queue.vocabulary.timeutil import utcnow
from app.web import audited
from app.web.forms import CodeForm, SecondFactorChangeForm
from app.web.guard import current_actor, require_login, requires
from app.web.throttle import client_address, login_throttle, refusal

bp = Blueprint("second_factor", __name__, url_prefix="/ui/account/second-factor")
bp.before_request(require_login)
TEMPLATE = "account/second_factor.html"
T = TypeVar("T")


def _forms() -> dict[str, SecondFactorChangeForm]:
    """The page's two forms, prefixed so their fields keep distinct names and ids."""
    return {
        "off_form": SecondFactorChangeForm(prefix="off"),
        "codes_form": SecondFactorChangeForm(prefix="codes"),
    }


def _manage_page(status: int = 200, **forms: Any) -> tuple[str, int]:
    with db.read() as conn:
        remaining = second_factor.unused_recovery_codes(conn, current_user.user)
    context = _forms() | forms
    return render_template(
        TEMPLATE, enrolled=True, remaining=remaining, me=current_actor(), **context
    ), status


@bp.route("", methods=["GET", "POST"])
@requires(Action.USE_ACCOUNT)
def page() -> Response | tuple[str, int]:
    """Enrolled: what can be changed. Otherwise show the pending secret as a QR code; a
    correct code from the app turns the factor on and shows the recovery codes, once."""
    user = current_user.user
    with db.read() as conn:
        enrolled = second_factor.is_enrolled(conn, user)
    if enrolled:
        return _manage_page()
    box = require_box()  # 503 naming SECRETS_KEY when the server has none
    with db.transaction() as conn:
        secret = second_factor.pending_secret(conn, user, box)
    form = CodeForm()
    status = 200
    if form.validate_on_submit():
        try:
            now = utcnow()
            with db.transaction() as conn:
                codes = second_factor.enrol(conn, user, box, form.code.data, now=now)
                target = f"user:{user.name}"
                audit_store.record(
                    conn, audited.origin(), AuditAction.SECOND_FACTOR_ON, target, at=now
                )
        except AccountError as exc:
            form.code.errors = [*form.code.errors, *exc.errors.values()]
            status = exc.status
        else:
            return render_template(TEMPLATE, recovery_codes=codes, me=current_actor()), 201
    elif form.is_submitted():
        status = 422
    uri = second_factor.provisioning_uri(secret, user.name)
    import segno  # here: only enrolment draws a QR code, and segno is 1.2 MB in every server

    qr = segno.make(uri, error="m").svg_data_uri(scale=5, dark="#000", light="#fff")
    return render_template(TEMPLATE, form=form, secret=secret, qr=qr, me=current_actor()), status


def _confirmed(
    form: SecondFactorChangeForm, change: AuditAction, act: Callable[[Connection, User], T]
) -> T:
    """``act``, audited as ``change``, once the password and a code (TOTP or recovery) are
    right; WrongPasswordOrCode, audited as a failure, when either is wrong. The attempt counts
    against the sign-in limits before anything is checked."""
    user, throttle, address = current_user.user, login_throttle(), client_address()
    if (retry_after := throttle.attempt(address, user.name)) is not None:
        raise refusal(retry_after)
    target, now = f"user:{user.name}", utcnow()
    with db.transaction() as conn:
        right = accounts.authenticate_password(conn, user.name, form.password.data) is not None
        if right:  # the code is checked (and spent) only after the password
            code = form.code.data
            right = second_factor.verify(conn, user, current_box(), code, now=now) is not None
        if right:
            result = act(conn, user)
            audit_store.record(conn, audited.origin(), change, target, at=now)
    if not right:
        audited.record_alone(AuditAction.SECOND_FACTOR_CHANGE_FAILED, target, change=change.value)
        raise WrongPasswordOrCode("the password or the code is wrong")
    throttle.succeeded(address, user.name)
    return result


@bp.post("/off")
@requires(Action.USE_ACCOUNT)
def turn_off() -> Response | tuple[str, int]:
    """Turn the second factor off: the password and a current code are required."""
    form = SecondFactorChangeForm(prefix="off")
    if not form.validate_on_submit():
        return _manage_page(422, off_form=form)
    try:
        _confirmed(form, AuditAction.SECOND_FACTOR_OFF, second_factor.disable)
    except WrongPasswordOrCode as exc:
        form.form_errors.append(exc.title + ".")
        return _manage_page(exc.status, off_form=form)
    flash("The second factor is off: signing in asks for the password only.", "success")
    return redirect(url_for(".page"))


@bp.post("/recovery-codes")
@requires(Action.USE_ACCOUNT)
def new_recovery_codes() -> tuple[str, int]:
    """Replace every recovery code by ten new ones, shown once: the password and a current
    code are required."""
    form = SecondFactorChangeForm(prefix="codes")
    if not form.validate_on_submit():
        return _manage_page(422, codes_form=form)
    renew = second_factor.regenerate_recovery_codes
    try:
        codes = _confirmed(form, AuditAction.RECOVERY_CODES_NEW, renew)
    except WrongPasswordOrCode as exc:
        form.form_errors.append(exc.title + ".")
        return _manage_page(exc.status, codes_form=form)
    return render_template(TEMPLATE, recovery_codes=codes, renewed=True, me=current_actor()), 201
