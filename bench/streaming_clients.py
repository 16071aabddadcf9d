"""Many OpenAI streaming clients at once against one /v1/chat/completions, and what they saw: when each asked,
when each token arrived, how many tokens each got. Stdlib HTTP (http.client reads a chunked stream line by line,
as it arrives), one thread per client, the same code for every server measured."""

import http.client
import itertools
import json
import threading
import time
from dataclasses import dataclass, field

TOPICS = [
    "the history of lighthouses", "how bridges are built", "the life of honey bees", "volcanoes and their eruptions",
    "the invention of the printing press", "how the human heart works", "the water cycle", "the Roman empire",
    "coral reefs", "how computers store numbers", "the migration of birds", "the first railways",
    "deserts of the world", "how bread is baked", "the solar system", "the history of chess", "glaciers",
    "how vaccines work", "ancient Egypt", "the life of a tree", "ocean tides", "the story of the bicycle",
    "how electricity reaches a home", "the Silk Road", "rainforests", "how paper is made", "the Moon landings",
    "whales", "the history of music notation", "how a city is planned", "earthquakes", "the story of coffee",
]


def prompt(round_no: int, client: int) -> str:
    """A request that makes a long answer (there is no ignore_eos): each client and each round its own topic."""
    topic = TOPICS[(round_no * 7 + client) % len(TOPICS)]
    return (f"Write a long and detailed essay about {topic}. Give it an introduction, five sections with "
            f"several paragraphs each, and a conclusion. (Essay {round_no}-{client}.)")


@dataclass
class Stream:
    started: float
    times: list[float] = field(default_factory=list)  # when each token (content chunk) arrived
    tokens: int = 0  # tokens generated: the usage chunk's count, else the content chunks counted
    error: str = ""

    @property
    def ended(self) -> float:
        return self.times[-1] if self.times else self.started


def stream_chat(port: int, body: dict, headers: dict[str, str]) -> Stream:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    seen = Stream(time.monotonic())
    try:
        connection.request("POST", "/v1/chat/completions", body=json.dumps(body),
                           headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        if response.status != 200:
            seen.error = f"HTTP {response.status}: {response.read(300).decode(errors='replace')}"
            return seen
        read_events(response, seen)
    except (OSError, http.client.HTTPException) as exc:
        seen.error = f"{type(exc).__name__}: {exc}"
    finally:
        connection.close()
    return seen


def read_events(response, seen: Stream) -> None:
    usage = None
    for raw in response:
        line = raw.strip()
        if not line.startswith(b"data: "):
            continue
        if line == b"data: [DONE]":
            break
        chunk = json.loads(line[6:])
        if "error" in chunk:
            seen.error = str(chunk["error"])[:300]
        if chunk.get("usage"):
            usage = chunk["usage"]["completion_tokens"]
        if any(choice.get("delta", {}).get("content") for choice in chunk.get("choices", [])):
            seen.times.append(time.monotonic())
    seen.tokens = usage if usage is not None else len(seen.times)


def run_clients(port: int, count: int, round_no: int, model: str, max_tokens: int,
                headers: list[dict[str, str]], extra: dict | None = None) -> list[Stream]:
    """`count` clients asking at once, each with its own prompt (and its own headers: a person each); `extra`
    goes into every request body."""
    results: list[Stream | None] = [None] * count

    def client(index: int) -> None:
        body = {"model": model, "stream": True, "max_tokens": max_tokens, "temperature": 0,
                "stream_options": {"include_usage": True},
                "messages": [{"role": "user", "content": prompt(round_no, index)}], **(extra or {})}
        results[index] = stream_chat(port, body, headers[index % len(headers)])

    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


@dataclass
class Measured:
    """One round of one system at one client count."""
    tokens_per_s: float
    ttft_ms: list[float]
    inter_token_ms: list[float]
    tokens: int
    errors: list[str]


def measure(streams: list[Stream]) -> Measured:
    """Aggregate rate: every token generated over the wall time from the first request to the last token."""
    wall = max(s.ended for s in streams) - min(s.started for s in streams)
    tokens = sum(s.tokens for s in streams)
    ttft = [(s.times[0] - s.started) * 1000 for s in streams if s.times]
    gaps = [(b - a) * 1000 for s in streams for a, b in itertools.pairwise(s.times)]
    return Measured(tokens / wall if wall > 0 else 0.0, ttft, gaps, tokens, [s.error for s in streams if s.error])


def percentile(values: list[float], share: float) -> float:
    """Nearest-rank percentile (share 0.5, 0.95); NaN for no values."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(share * len(ordered) + 0.5) - 1))]
