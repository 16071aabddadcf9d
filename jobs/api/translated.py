"""What the doors that translate /v1's answers share (Anthropic's, the Responses API, Ollama's): reading the
chat stream /v1's Answer writes, and serving a translation of it."""

from collections.abc import Callable, Iterator

from django.http import StreamingHttpResponse


def pieces(sse: str) -> Iterator[tuple[str, str]]:
    """("comment", line) for an SSE comment (a queued job's place), ("data", payload) for each chunk."""
    for line in sse.split("\n"):
        if line.startswith(":"):
            yield "comment", line
        elif line.startswith("data: "):
            yield "data", line.removeprefix("data: ")


class Translator:
    """A door's stream translator: each chunk of /v1's stream given to `chunk`; SSE comments (a queued job's place)
    passed on as they are where the door's stream has comments (`comments`)."""

    comments = True

    def lines(self, sse: str) -> Iterator[str]:
        for kind, payload in pieces(sse):
            if kind == "data":
                yield from self.chunk(payload)
            elif self.comments:
                yield payload + "\n\n"

    def chunk(self, data: str) -> Iterator[str]:
        raise NotImplementedError


def streamed(answer: StreamingHttpResponse, lines: Callable[[str], Iterator[str]],
             content_type: str = "text/event-stream") -> StreamingHttpResponse:
    """`answer`'s stream, each piece given to `lines` and what it makes sent on."""
    async def translated():
        async for piece in answer.streaming_content:
            for line in lines(piece.decode() if isinstance(piece, bytes) else piece):
                yield line
    return StreamingHttpResponse(translated(), content_type=content_type,
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
