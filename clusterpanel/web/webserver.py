"""The panel's web server: daphne, refusing a request body by its size before reading it.

Under daphne no limit inside Django comes in time: Twisted's Request receives the whole body (into a
temporary file past 100 kB) before daphne calls the application, daphne then puts all of it on the
application's queue at once, and Django's ASGIHandler reads that queue to the end before any middleware or
view runs. An anonymous 200 MiB POST to /v1/chat/completions was read whole before its 401, and the process
kept the 205 MiB. So the size is checked here, where Twisted has the headers but none of the body
(`gotLength`), and as a chunked body arrives (`handleContentChunk`): over the limit, the caller gets a 413 and
the connection is closed without reading the rest.

Its access lines go to the `clusterpanel.access` logger at DEBUG (LOG_LEVEL=DEBUG shows them) instead of
daphne's stdout: at the default level a panel's log says what happened to laptops and jobs, not which pages
were fetched.

Run it as daphne: `python -m clusterpanel.web.webserver -b 127.0.0.1 -p 8000 clusterpanel.asgi:application`.
"""

import logging
from urllib.parse import unquote

from daphne.access import AccessLogGenerator
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from daphne.server import Server
from django.conf import settings
from django.urls import Resolver404, resolve

from clusterpanel.web import bodylimits

access_log = logging.getLogger("clusterpanel.access")


class LimitedRequest(WebRequest):
    """daphne's request, which answers 413 instead of receiving a body over the caller's limit."""

    refused = False
    received = 0

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # daphne hands the raw body to Django, which parses forms itself. Twisted's own parse of a multipart
        # body (never used) answered a malformed one with a bare 400, no header nor word, before the panel
        # could say why.
        self._parsePOSTFormSubmission = False

    def gotLength(self, length: int | None) -> None:
        """Called once the request line and every header are in (`length`: None for a chunked body)."""
        self.limit = self.body_limit() if length != 0 else 0
        if length is not None and length > self.limit:
            super().gotLength(0)
            self.refuse(length)
        else:
            super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:
        if self.refused:
            return  # bytes that arrived with the headers, before the connection closed
        self.received += len(data)
        if self.received > self.limit:  # a chunked body, which announced no length
            self.refuse(None)
            return
        super().handleContentChunk(data)

    def process(self):
        if not self.refused:
            return super().process()

    def body_limit(self) -> int:
        # The channel keeps the path for itself until the body is in (Request.path is set only then).
        path = self.channel._path
        return bodylimits.limit_for(self.credentials_presented(), lambda: route_name(path))

    def credentials_presented(self) -> bool:
        """A session cookie or a bearer token, valid or not: checking them needs the database."""
        if settings.SESSION_COOKIE_NAME.encode() in self.received_cookies:
            return True
        authorization = self.requestHeaders.getRawHeaders(b"Authorization") or [b""]
        return authorization[0][:7].lower() == b"bearer " and bool(authorization[0][7:].strip())

    def refuse(self, length: int | None) -> None:
        self.refused = True
        self.requestHeaders.removeHeader(b"Expect")  # no "100 Continue" after the answer
        path = self.channel._path
        self.channel.transport.write(bodylimits.refusal(path, self.limit, length, self.credentials_presented()))
        self.channel.loseConnection()  # stops reading: the rest of the body is never received
        self.server.log_action("http", "complete", {
            "path": path.decode("ascii", "replace"), "status": 413, "method": self.method_sent(),
            "client": f"{self.client.host}:{self.client.port}" if hasattr(self.client, "host") else None,
            "time_taken": 0, "size": 0})

    def method_sent(self) -> str:
        return self.channel._command.decode("ascii", "replace")


def route_name(path: bytes) -> str | None:
    """The URL name of the view a request path goes to ("api:upload"), None when none does. The path is
    taken as daphne hands it to Django (everything before "?", unquoted), so both see the same route; an
    absolute-form target ("http://host/...") goes to no view of the panel."""
    try:
        return resolve(unquote(path.split(b"?", 1)[0].decode("ascii", "replace"))).view_name
    except (Resolver404, ValueError):
        return None


class LimitedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedRequest
        return protocol


class DebugAccessLog(AccessLogGenerator):
    def __init__(self) -> None:
        super().__init__(stream=None)

    def write_entry(self, host, date, request, status=None, length=None, ident=None, user=None) -> None:
        access_log.debug('%s "%s" %s %s', host, request, status or "-", length or "-")


class PanelServer(Server):
    """daphne's server, its connections making LimitedRequests, its access lines at DEBUG, its WebSocket pings
    as settings say (WEBSOCKET_PING_S) whatever its command line says.

    daphne has no option for the request class. Server.run() makes its factory as
    `self.http_factory = HTTPFactory(self)` and listens with `self.http_factory`: this property puts ours there.
    """

    def __init__(self, *args, **kwargs) -> None:
        kwargs["action_logger"] = DebugAccessLog()
        kwargs.update(ping_interval=settings.WEBSOCKET_PING_S, ping_timeout=settings.WEBSOCKET_PING_TIMEOUT_S)
        super().__init__(*args, **kwargs)

    @property
    def http_factory(self) -> HTTPFactory:
        return self._http_factory

    @http_factory.setter
    def http_factory(self, daphnes: HTTPFactory) -> None:
        self._http_factory = LimitedHTTPFactory(self)  # daphne's own is never listened with


class PanelCommandLine(CommandLineInterface):
    """daphne's own command line (every option of `daphne`), running a PanelServer."""

    server_class = PanelServer


if __name__ == "__main__":
    PanelCommandLine.entrypoint()
