"""A busy lab for ten minutes, through the panel's real doors: four people chatting on the chat page (send, then
follow the answer over its WebSocket, a few seconds to read it, again; their conversations grow past the
context), a 100-line batch, a script streaming /v1 answers one after another, and the dashboard open the whole
time. Counts what was asked, answered and failed, answers that never came (hung), sockets that dropped, and the
web server's memory at the start and the end.

    .venv/bin/python bench/soak.py [--minutes 10] [--users 4]
"""

import argparse
import json
import threading
import time
from collections import Counter

import requests
from scratch_panel import scratch_panel
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

HUNG_AFTER_S = 300  # an answer that has not ended after this long counts as hung
QUESTIONS = ["What is a lighthouse for?", "Name a famous one.", "How tall are they?", "Who kept them?",
             "What replaced the keepers?", "Tell me more."]


class Soak:
    def __init__(self, panel, deployment, minutes: float) -> None:
        self.panel, self.deployment = panel, deployment
        self.until = time.monotonic() + minutes * 60
        self.counts: Counter = Counter()
        self.lock = threading.Lock()
        self.ws = panel.base.replace("http", "ws")

    def count(self, what: str, n: int = 1) -> None:
        with self.lock:
            self.counts[what] += n

    def session_of(self, username: str) -> tuple[dict, str]:
        """Cookies and a CSRF token of a logged-in user (a browser's)."""
        from django.test import Client

        from clusterpanel.accounts.models import User

        client = Client()
        client.force_login(User.objects.get(username=username))
        session = requests.Session()
        session.cookies.set("sessionid", client.cookies["sessionid"].value)
        session.get(f"{self.panel.base}/chat/", timeout=30)
        return session, session.cookies.get("csrftoken")

    def chat_user(self, username: str) -> None:
        session, csrf = self.session_of(username)
        page = session.get(f"{self.panel.base}/chat/", timeout=30)
        conversation = page.url.rstrip("/").rsplit("/", 1)[1]
        cookie = "; ".join(f"{k}={v}" for k, v in session.cookies.items())
        turn = 0
        while time.monotonic() < self.until:
            sent = session.post(f"{self.panel.base}/chat/{conversation}/send/", timeout=30,
                                headers={"X-CSRFToken": csrf, "Referer": page.url},
                                json={"text": QUESTIONS[turn % len(QUESTIONS)], "deployment": self.deployment.pk,
                                      "params": {"max_tokens": 48, "temperature": 0.7}})
            turn += 1
            self.count("chat asked")
            if sent.status_code != 200:
                self.count("chat failed")
                continue
            self.follow(sent.json()["job"], cookie)
            time.sleep(3)  # reading the answer

    def follow(self, job: int, cookie: str) -> None:
        """The answer over the job's WebSocket, as chat.js follows it (reopening after a drop)."""
        deadline = time.monotonic() + HUNG_AFTER_S
        while time.monotonic() < deadline:
            try:
                with connect(f"{self.ws}/ws/jobs/{job}/", additional_headers={"Cookie": cookie},
                             origin=self.panel.base, open_timeout=30) as socket:
                    while time.monotonic() < deadline:
                        event = json.loads(socket.recv(timeout=deadline - time.monotonic()))
                        if event.get("event") == "done":
                            self.count("chat answered" if event["status"] == "succeeded" else "chat failed")
                            return
            except TimeoutError:
                break
            except (ConnectionClosed, InvalidStatus, OSError):
                self.count("sockets dropped")
                time.sleep(1)
        self.count("chat hung")

    def script(self, token: str) -> None:
        while time.monotonic() < self.until:
            self.count("/v1 asked")
            body = {"messages": [{"role": "user", "content": "Write a short poem about the sea."}],
                    "max_tokens": 64, "stream": True}
            try:
                with requests.post(f"{self.panel.base}/v1/chat/completions", json=body, stream=True,
                                   headers={"Authorization": f"Bearer {token}"}, timeout=(10, HUNG_AFTER_S)) as got:
                    lines = [line for line in got.iter_lines(decode_unicode=True) if line]
                ok = got.status_code == 200 and lines[-1:] == ["data: [DONE]"] and '"error"' not in "".join(lines)
                self.count("/v1 answered" if ok else "/v1 failed")
            except requests.Timeout:
                self.count("/v1 hung")
            except requests.RequestException:
                self.count("/v1 failed")

    def dashboard(self, cookie: str) -> None:
        while time.monotonic() < self.until:
            try:
                with connect(f"{self.ws}/ws/dashboard/", additional_headers={"Cookie": cookie},
                             origin=self.panel.base) as socket:
                    while time.monotonic() < self.until:
                        try:
                            socket.recv(timeout=1)
                            self.count("dashboard messages")
                        except TimeoutError:
                            continue
                    return
            except (ConnectionClosed, InvalidStatus, OSError):
                self.count("sockets dropped")
                time.sleep(1)


def rss_mb(pid: int) -> float:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def batch_lines(count: int) -> bytes:
    return "\n".join(json.dumps({"custom_id": f"q{i}", "method": "POST", "url": "/v1/chat/completions", "body": {
        "messages": [{"role": "user", "content": f"Give one fact about the number {i}."}], "max_tokens": 32}})
        for i in range(count)).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--users", type=int, default=4)
    args = parser.parse_args()
    with scratch_panel(collector=True) as panel:
        from clusterpanel.accounts.models import ApiToken, Role, User
        from jobs.batches import service as batches
        from jobs.models import JobStatus
        from models_app.library.adding import ensure_bundled

        deployment = panel.deploy(ensure_bundled(), ctx=2048)
        users = [User.objects.create_user(f"user{i}", password="soak-password-1", role=Role.USER)
                 for i in range(args.users)]
        token = ApiToken.issue(users[0], "soak")[1]
        soak = Soak(panel, deployment, args.minutes)
        memory_start = rss_mb(panel.pids["web"])
        started = time.monotonic()
        batch = batches.from_file(users[-1], deployment, "soak.jsonl", batch_lines(100))
        workers = [threading.Thread(target=soak.chat_user, args=(user.username,)) for user in users]
        workers += [threading.Thread(target=soak.script, args=(token,)),
                    threading.Thread(target=soak.dashboard, args=(panel.cookie,))]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        soaked = time.monotonic() - started
        memory_end = rss_mb(panel.pids["web"])
        while batches.counts(batch)["done"] < 100 and time.monotonic() - started < soaked + HUNG_AFTER_S:
            time.sleep(1)
        counted = batches.counts(batch)
        soak.count("batch answered", counted[JobStatus.SUCCEEDED])
        soak.count("batch failed", counted[JobStatus.FAILED] + counted[JobStatus.CANCELLED])
        soak.count("batch hung", counted[JobStatus.QUEUED] + counted[JobStatus.RUNNING])
        report(soak.counts, soaked, memory_start, memory_end, args)


def report(counts: Counter, soaked: float, start: float, end: float, args) -> None:
    print(f"\n{args.users} chat users, a 100-line batch, a /v1 streaming script and the dashboard for "
          f"{soaked / 60:.1f} min\n")
    print("| traffic | asked | answered | failed | hung |\n|---|---:|---:|---:|---:|")
    for name in ("chat", "/v1", "batch"):
        asked = counts[f"{name} asked"] or (100 if name == "batch" else 0)
        print(f"| {name} | {asked} | {counts[f'{name} answered']} | {counts[f'{name} failed']} | "
              f"{counts[f'{name} hung']} |")
    print(f"\nsockets dropped: {counts['sockets dropped']}; dashboard messages: {counts['dashboard messages']}")
    print(f"web server memory: {start:.0f} MB at the start, {end:.0f} MB at the end")


if __name__ == "__main__":
    main()
