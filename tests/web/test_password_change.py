"""Self-service password change: the current password is required, the new one follows the
usual rules, the user's other sessions end and this one continues."""

from __future__ import annotations

from tests.builders import PASSWORD
from tests.web.conftest import Team, login

NEW_PASSWORD = "a much longer new passphrase"


def test_password_change_needs_current_password_and_ends_other_sessions(team: Team) -> None:
    here = team.person("prod")
    elsewhere = team.person("prod")
    page = here.get("/ui/account/password")
    assert page.status_code == 200 and 'autocomplete="new-password"' in page.get_data(as_text=True)
    wrong = here.post(
        "/ui/account/password", {"current_password": "not it at all!", "new_password": NEW_PASSWORD}
    )
    assert wrong.status_code == 422 and "is not your password" in wrong.get_data(as_text=True)
    short = here.post("/ui/account/password", {"current_password": PASSWORD, "new_password": "x"})
    assert short.status_code == 422 and "12 to 1024" in short.get_data(as_text=True)
    assert elsewhere.get("/ui/").status_code == 200  # nothing changed yet
    done = here.post(
        "/ui/account/password", {"current_password": PASSWORD, "new_password": NEW_PASSWORD}
    )
    assert done.status_code == 302
    assert here.get("/ui/").status_code == 200  # this session continues
    assert elsewhere.get("/ui/").status_code == 302  # the other one ended
    client = team.app.test_client()
    assert login(client, "prod").status_code == 401
    assert login(client, "prod", NEW_PASSWORD).status_code == 302


def test_password_change_page_needs_sign_in_and_csrf(team: Team) -> None:
    client = team.app.test_client()
    assert client.get("/ui/account/password").status_code == 302
    here = team.person("prod")
    form = {"current_password": PASSWORD, "new_password": NEW_PASSWORD}
    assert here.client.post("/ui/account/password", data=form).status_code == 400
