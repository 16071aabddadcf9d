"""Guessing passwords on the login page: after five wrong ones for a user name from one address, that name is
refused from there (even with the right password) for a while, said in words; a made-up X-Forwarded-For does
not buy new tries; the same user can still log in from another address, so a stranger cannot lock them out."""

import re

import requests
from django.test import Client

from tests.conftest import PASSWORD

LIMIT = 5  # settings.AXES_FAILURE_LIMIT


def try_login(base: str, username: str, password: str, **headers: str) -> requests.Response:
    session = requests.Session()
    form = session.get(f"{base}/login/", timeout=30).text
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1)
    return session.post(f"{base}/login/", data={"username": username, "password": password,
                                                "csrfmiddlewaretoken": token},
                        headers={"Referer": f"{base}/login/", **headers}, allow_redirects=False, timeout=30)


def test_it_stops_answering_wrong_passwords_after_five(alice, web_server):
    answers = [try_login(web_server, "alice", f"guess {n}", **{"X-Forwarded-For": f"203.0.113.{n}"})
               for n in range(15)]
    codes = [answer.status_code for answer in answers]
    assert codes[:LIMIT - 1] == [200] * (LIMIT - 1), "the first wrong passwords get the login page again"
    assert codes[LIMIT:] == [429] * (15 - LIMIT), f"then every try is refused, whatever X-Forwarded-For says: {codes}"
    assert "Too many tries" in answers[-1].text and "minutes" in answers[-1].text
    assert try_login(web_server, "alice", PASSWORD).status_code == 429, "the right password waits too"


def test_it_does_not_lock_the_user_out_from_another_address(alice, web_server):
    for n in range(LIMIT + 1):
        try_login(web_server, "alice", f"guess {n}")
    elsewhere = Client(REMOTE_ADDR="192.0.2.7")  # another computer
    answer = elsewhere.post("/login/", {"username": "alice", "password": PASSWORD})
    assert answer.status_code == 302 and answer["Location"] == "/start/"  # then the dashboard or the chat
