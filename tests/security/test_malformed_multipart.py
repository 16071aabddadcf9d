"""A malformed multipart body reaches the panel, which says what is wrong: Twisted, under daphne, parsed such
bodies itself (for nothing: daphne hands Django the raw body) and answered a bare 400, no header nor word."""

import requests

from clusterpanel.accounts.models import ApiToken

BODY = b"--c637e12e2b1a998d80d1b087531af51c--\r\n"  # a closing boundary alone
HEADERS = {"Content-Type": "multipart/form-data; boundary=c637e12e2b1a998d80d1b087531af51c"}


def test_a_malformed_multipart_body_gets_the_panels_own_answer(web_server, bob):
    key = ApiToken.issue(bob, "script")[1]
    answer = requests.post(f"{web_server}/api/batches/", data=BODY, timeout=30,
                           headers={**HEADERS, "Authorization": f"Bearer {key}"})
    assert answer.status_code == 400 and answer.json() == {"error": "file: field required.", "field": "file"}
    files = requests.post(f"{web_server}/v1/files", data=BODY, timeout=30,
                          headers={**HEADERS, "Authorization": f"Bearer {key}"})
    assert files.status_code == 400 and files.json()["error"]["param"] == "file"
