"""Admin pages: users (create, role and cap, disable) and API tokens (issue once, revoke)."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from flask_login import current_user
from werkzeug.wrappers import Response

from app.accounts import second_factor
from app.accounts import service as accounts
from app.accounts.errors import AccountError, AccountNotFound, FreshLoginRequired
from app.infra import db
from app.queue.rules.policy import ROLES, Action, can, caps_priority
from app.queue.vocabulary.states import Role
from app.queue.vocabulary.timeutil import utcnow
from app.web import audited
from app.web.forms import TOKEN_LIFETIMES, ConfirmForm, CreateUserForm, TokenForm, UpdateUserForm
from app.web.guard import current_actor, login_url, require_login, requires
from app.web.login import is_fresh_login

bp = Blueprint("admin", __name__, url_prefix="/ui/admin")
FRESH_LOGIN_NEEDED = "Confirm your password to change users or issue tokens."


# Each route's action lets only admins in (others get 403: the pages exist, they may not use
# them); with REQUIRE_TOTP_FOR_ADMINS, admins enrol a second factor before using them.


@bp.before_request
def require_admin_enrolled() -> Response | None:
    """Signed-in users only; admins must have a second factor when the config says so."""
    if (refused := require_login()) is not None:
        return refused
    if current_app.config["REQUIRE_TOTP_FOR_ADMINS"] and can(current_actor(), Action.MANAGE_USERS):
        with db.read() as conn:
            enrolled = second_factor.is_enrolled(conn, current_user.user)
        if not enrolled:
            flash("Turn on the second factor to use the admin pages.", "info")
            return redirect(url_for("web.second_factor.page"))
    return None


def _require_fresh_login(back_to: str = ".users") -> Response | None:
    """Grants of power (roles, new users, re-enabling, API tokens) need a recent password
    check: an unattended session cannot make admins or mint credentials."""
    if is_fresh_login():
        return None
    flash(FRESH_LOGIN_NEEDED, "info")
    return redirect(
        url_for("web.auth.login", next=url_for(back_to))
        if request.method == "POST"
        else login_url()
    )


def _users_page(create_form: CreateUserForm | None = None, status: int = 200) -> tuple[str, int]:
    with db.read() as conn:
        users = accounts.list_users(conn, current_actor())
    forms = {}
    for user in users:
        form = UpdateUserForm(prefix=f"u{user.id}", formdata=None)
        form.role.data = user.role
        form.max_priority.data = user.max_priority_label
        forms[user.id] = form
    return render_template(
        "admin/users.html",
        users=users,
        caps={user.id: caps_priority(user.actor()) for user in users},
        pages={user.id: can(user.actor(), Action.SIGN_IN) for user in users},
        sign_in_roles=[role for role in Role if role in ROLES[Action.SIGN_IN]],
        token_roles=[role for role in Role if role not in ROLES[Action.SIGN_IN]],
        update_forms=forms,
        create_form=create_form or CreateUserForm(formdata=None),
        confirm_form=ConfirmForm(),
        fresh=is_fresh_login(),
        me=current_actor(),
    ), status


@bp.get("/users")
@requires(Action.MANAGE_USERS)
def users() -> tuple[str, int]:
    return _users_page()


@bp.post("/users")
@requires(Action.MANAGE_USERS)
def create_user() -> Response | tuple[str, int]:
    if (refused := _require_fresh_login()) is not None:
        return refused
    form = CreateUserForm()
    if not form.validate():
        return _users_page(form, 422)
    try:
        with db.transaction() as conn:
            user = accounts.create_user(
                conn,
                current_actor(),
                form.name.data,
                form.role.data,
                now=utcnow(),
                origin=audited.origin(),
                password=form.password.data or None,
                max_priority=form.max_priority.data,
            )
    except AccountError as exc:
        for name, message in (exc.errors or {"name": exc.detail}).items():
            field = form._fields.get(name, form.name)
            field.errors = [*field.errors, message]
        return _users_page(form, exc.status)
    flash(f"User {user.name} created.", "success")
    return redirect(url_for(".users"))


@bp.post("/users/<name>/update")
@requires(Action.MANAGE_USERS)
def update_user(name: str) -> Response | tuple[str, int]:
    if (refused := _require_fresh_login()) is not None:
        return refused
    with db.read() as conn:
        user = accounts.get_user(conn, current_actor(), name)
    form = UpdateUserForm(prefix=f"u{user.id}")
    if not form.validate():
        flash(f"Could not update {name}: choose a listed role and cap.", "error")
        return redirect(url_for(".users"))
    try:
        with db.transaction() as conn:
            accounts.update_user(
                conn,
                current_actor(),
                name,
                role=form.role.data,
                max_priority=form.max_priority.data,
                now=utcnow(),
                origin=audited.origin(),
                fresh=is_fresh_login(),
            )
    except AccountError as exc:
        flash(exc.detail, "error")
        return _users_page(status=exc.status)
    flash(f"{name} is now {form.role.data} (cap {form.max_priority.data}).", "success")
    return redirect(url_for(".users"))


def _set_disabled(name: str, disabled: bool) -> Response | tuple[str, int]:
    try:
        with db.transaction() as conn:
            accounts.set_disabled(
                conn,
                current_actor(),
                name,
                disabled=disabled,
                now=utcnow(),
                origin=audited.origin(),
                fresh=is_fresh_login(),
            )
    except FreshLoginRequired:
        return _require_fresh_login() or _users_page(status=403)
    except AccountNotFound:
        raise  # the error page, as for any unknown user or token
    except AccountError as exc:
        flash(exc.detail, "error")
        return redirect(url_for(".users"))
    flash(f"{name} {'disabled' if disabled else 'enabled'}.", "success")
    return redirect(url_for(".users"))


@bp.post("/users/<name>/disable")
@requires(Action.MANAGE_USERS)
def disable_user(name: str) -> Response | tuple[str, int]:
    return _set_disabled(name, True)


@bp.post("/users/<name>/enable")
@requires(Action.MANAGE_USERS)
def enable_user(name: str) -> Response | tuple[str, int]:
    if (refused := _require_fresh_login()) is not None:
        return refused
    return _set_disabled(name, False)


def _tokens_page(
    form: TokenForm | None = None,
    new_token: tuple[str, str, str] | None = None,
    status: int = 200,
) -> tuple[str, int]:
    """The tokens page; ``new_token``: a token just issued (itself, its user, its label)."""
    actor = current_actor()
    with db.read() as conn:
        tokens = accounts.list_tokens(conn, actor)
        users = accounts.list_users(conn, actor)
    form = form or TokenForm(formdata=None)
    form.user.choices = [u.name for u in users if not u.disabled]
    return render_template(
        "admin/tokens.html",
        tokens=tokens,
        now=utcnow(),
        form=form,
        new_token=new_token,
        confirm_form=ConfirmForm(),
    ), status


@bp.get("/tokens")
@requires(Action.MANAGE_TOKENS)
def tokens() -> tuple[str, int]:
    return _tokens_page()


@bp.post("/tokens")
@requires(Action.MANAGE_TOKENS)
def create_token() -> Response | tuple[str, int]:
    """Issue a token and show it in this response only: it is never stored or shown again."""
    if (refused := _require_fresh_login(".tokens")) is not None:
        return refused
    form = TokenForm()
    with db.read() as conn:
        names = [u.name for u in accounts.list_users(conn, current_actor())]
    form.user.choices = names
    if not form.validate():
        return _tokens_page(form, status=422)
    try:
        with db.transaction() as conn:
            _, raw = accounts.create_token(
                conn,
                current_actor(),
                form.user.data,
                now=utcnow(),
                origin=audited.origin(),
                label=form.label.data or "",
                expires_in=TOKEN_LIFETIMES[form.expires_in.data],
            )
    except AccountError as exc:
        form.label.errors = [exc.detail]
        return _tokens_page(form, status=exc.status)
    return _tokens_page(new_token=(raw, form.user.data, form.label.data or ""), status=201)


@bp.post("/tokens/<id:token_id>/revoke")
@requires(Action.MANAGE_TOKENS)
def revoke_token(token_id: int) -> Response:
    try:
        with db.transaction() as conn:
            accounts.revoke_token(
                conn, current_actor(), token_id, now=utcnow(), origin=audited.origin()
            )
    except AccountNotFound:
        raise  # the error page, as for any unknown user or token
    except AccountError as exc:
        flash(exc.detail, "error")
        return redirect(url_for(".tokens"))
    flash(f"Token {token_id} revoked.", "success")
    return redirect(url_for(".tokens"))
