"""A small HTTP/1.1 forwarding proxy on 127.0.0.1, in front of one server on loopback (Iceberg's
REST catalog or the object store), that can lose, refuse, delay or repeat chosen requests: what
load balancers, gateways and networks do to a lakehouse's traffic. The fault tier of the tests
(tests/lakehouse/test_commit_faults.py) puts one in front of the catalog and one in front of the
store.

Each request is matched against the rules in the order they were added; the first whose method,
path and count match decides what happens to it (``Fault``), else it is forwarded as it came. A
rule fires ``times`` times (None: until removed). Requests and responses are forwarded whole (a
chunked body is re-sent with its length), one upstream connection per client connection, so the
upstream sees requests in the order each client sent them.

    with ForwardingProxy(catalog_port) as proxy:
        rule = proxy.add(Rule("POST", r"/tables/t$", Fault.lose_answer()))
        ...  # a client pointed at proxy.url commits; the catalog commits, the client never hears
        assert rule.fired == 1
"""

from __future__ import annotations

import re
import socket
import socketserver
import threading
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

_BODYLESS_STATUS = {204, 304}
_REASONS = {200: "OK", 409: "Conflict", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout"}


@dataclass
class Message:
    """A request or a response: its first line, its headers (in order, as sent) and its whole body."""

    first_line: str
    headers: list[tuple[str, str]]
    body: bytes = b""

    def header(self, name: str) -> Optional[str]:
        lowered = name.lower()
        return next((v for k, v in self.headers if k.lower() == lowered), None)

    @property
    def method(self) -> str:
        return self.first_line.split(" ", 1)[0]

    @property
    def path(self) -> str:
        return self.first_line.split(" ")[1]

    @property
    def status(self) -> int:
        return int(self.first_line.split(" ")[1])

    def encode(self) -> bytes:
        """As sent on: the headers as they came, but a chunked body (read whole) framed by its length."""
        headers = self.headers
        if (self.header("transfer-encoding") or "").lower() == "chunked":
            headers = [(k, v) for k, v in headers if k.lower() != "transfer-encoding"]
            headers.append(("Content-Length", str(len(self.body))))
        head = self.first_line + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
        return head.encode("latin-1") + self.body


def _read_line(stream) -> Optional[str]:  # noqa: ANN001
    line = stream.readline(65537)
    if not line:
        return None
    return line.decode("latin-1").rstrip("\r\n")


def _read_head(stream) -> Optional[tuple[str, list[tuple[str, str]]]]:  # noqa: ANN001
    first = _read_line(stream)
    while first == "":  # tolerate blank lines between messages
        first = _read_line(stream)
    if first is None:
        return None
    headers = []
    while True:
        line = _read_line(stream)
        if line is None:
            raise ConnectionError("connection closed inside a message's headers")
        if line == "":
            return first, headers
        name, _, value = line.partition(":")
        headers.append((name.strip(), value.strip()))


def _read_body(stream, message: Message, *, until_close: bool) -> bytes:  # noqa: ANN001
    if (message.header("transfer-encoding") or "").lower() == "chunked":
        parts = []
        while True:
            size = int((_read_line(stream) or "0").split(";")[0], 16)
            if size == 0:
                while _read_line(stream):  # trailers, up to the blank line
                    pass
                return b"".join(parts)
            parts.append(stream.read(size))
            stream.readline()
    length = message.header("content-length")
    if length is not None:
        return stream.read(int(length))
    return stream.read() if until_close else b""


def read_request(stream, on_continue: Callable[[], None]) -> Optional[Message]:  # noqa: ANN001
    """The next request on a client connection, or None at its end. ``on_continue`` answers a
    client that waits for ``100 Continue`` before sending its body (as AWS's SDK does on PUT)."""
    head = _read_head(stream)
    if head is None:
        return None
    request = Message(*head)
    if (request.header("expect") or "").lower() == "100-continue":
        on_continue()
    request.body = _read_body(stream, request, until_close=False)
    return request


def read_response(stream, method: str) -> Message:  # noqa: ANN001
    """The final response to a ``method`` request (interim 1xx responses skipped)."""
    while True:
        head = _read_head(stream)
        if head is None:
            raise ConnectionError("the server closed the connection without an answer")
        response = Message(*head)
        if 100 <= response.status < 200:
            continue
        if method == "HEAD" or response.status in _BODYLESS_STATUS:
            return response
        response.body = _read_body(stream, response, until_close=True)
        return response


def answer(status: int, body: bytes = b"", headers: Optional[dict[str, str]] = None) -> Message:
    """A response of the proxy's own (JSON when it has a body, as Iceberg's REST errors are)."""
    extra = [("Content-Type", "application/json")] if body else []
    framing = [("Content-Length", str(len(body)))]
    return Message(f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}", [*extra, *framing, *(headers or {}).items()], body)


def rest_error(status: int, kind: str, text: str, headers: Optional[dict[str, str]] = None) -> Message:
    """An error as Iceberg's REST catalog writes one (an ErrorModel), so its client reads it as the catalog's."""
    import json

    body = json.dumps({"error": {"message": text, "type": kind, "code": status}}).encode()
    return answer(status, body, headers)


class Lost(Exception):
    """Close the client's connection without an answer."""


@dataclass
class Exchange:
    """What a fault may do with a request: forward it (as often as it likes) and see the answers."""

    request: Message
    _forward: Callable[[Message], Message]

    def forward(self) -> Message:
        return self._forward(self.request)


@dataclass
class Fault:
    """What to do with a matching request: ``act(exchange)`` returns the answer the client gets,
    or raises ``Lost`` to close its connection without one."""

    name: str
    act: Callable[[Exchange], Message]

    @staticmethod
    def refuse(status: int, kind: str = "CommitFailedException", headers: Optional[dict[str, str]] = None) -> Fault:
        """Answer ``status`` without forwarding: the server never sees the request."""
        return Fault(f"{status} before the server", lambda _: rest_error(status, kind, f"injected {status}", headers))

    @staticmethod
    def drop() -> Fault:
        """Close the client's connection without forwarding: the server never sees the request."""
        def act(_: Exchange) -> Message:
            raise Lost
        return Fault("dropped", act)

    @staticmethod
    def lose_answer() -> Fault:
        """Forward, then close the client's connection without the server's answer."""
        def act(exchange: Exchange) -> Message:
            exchange.forward()
            raise Lost
        return Fault("answer lost", act)

    @staticmethod
    def replace_answer(status: int, headers: Optional[dict[str, str]] = None) -> Fault:
        """Forward, then answer ``status`` (e.g. a 503 with ``Retry-After``) in place of the server's answer."""
        def act(exchange: Exchange) -> Message:
            exchange.forward()
            return rest_error(status, "ServiceUnavailableException", f"injected {status} after the server answered", headers)
        return Fault(f"{status} after the server", act)

    @staticmethod
    def send_again(between: Optional[Callable[[], None]] = None) -> Fault:
        """A gateway that retries: forward, drop the answer, run ``between`` (another client's
        commit, say), forward the same request again and answer with the second answer."""
        def act(exchange: Exchange) -> Message:
            exchange.forward()
            if between is not None:
                between()
            return exchange.forward()
        return Fault("sent again" + (" after another commit" if between else ""), act)

    @staticmethod
    def before(hook: Callable[[Message], None], then: Optional[Fault] = None) -> Fault:
        """Run ``hook(request)`` first (kill the client, say), then forward (or apply ``then``)."""
        def act(exchange: Exchange) -> Message:
            hook(exchange.request)
            return then.act(exchange) if then is not None else exchange.forward()
        return Fault("hook before forwarding", act)

    @staticmethod
    def after(hook: Callable[[Message], None]) -> Fault:
        """Forward, run ``hook(request)`` once the server has answered, then lose the answer."""
        def act(exchange: Exchange) -> Message:
            exchange.forward()
            hook(exchange.request)
            raise Lost
        return Fault("hook after forwarding, answer lost", act)


@dataclass
class Rule:
    """Requests whose method is ``method`` (``*``: any), whose path (query string included)
    ``path`` matches and whose body ``body`` matches (None: any), by ``re.search``; ``times`` of
    them (None: all) get ``fault``."""

    method: str
    path: str
    fault: Fault
    times: Optional[int] = 1
    body: Optional[str] = None
    fired: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def take(self, request: Message) -> bool:
        """Whether the rule takes ``request`` (and counts it)."""
        if self.method not in ("*", request.method) or not re.search(self.path, request.path):
            return False
        if self.body is not None and not re.search(self.body, request.body.decode("latin-1")):
            return False
        with self._lock:
            if self.times is not None and self.fired >= self.times:
                return False
            self.fired += 1
            return True


@dataclass(frozen=True)
class Seen:
    """A request the proxy handled: method, path, and what became of it."""

    method: str
    path: str
    outcome: str  # the upstream's status, or the fault's name


class ForwardingProxy:
    """A forwarding proxy on 127.0.0.1 (a free port) in front of ``127.0.0.1:upstream_port``.
    ``latency`` seconds pass before each request is forwarded (time to the first byte)."""

    def __init__(self, upstream_port: int, *, latency: float = 0.0, timeout: float = 300.0) -> None:
        self.upstream_port = upstream_port
        self.latency = latency
        self.timeout = timeout
        self._rules: list[Rule] = []
        self._lock = threading.Lock()
        self.seen: list[Seen] = []
        self._server: Optional[socketserver.ThreadingTCPServer] = None

    @property
    def port(self) -> int:
        assert self._server is not None, "the proxy is not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule: all requests are forwarded as they came from now on."""
        with self._lock:
            self._rules.clear()

    def _rule_for(self, request: Message) -> Optional[Rule]:
        with self._lock:
            rules = list(self._rules)
        return next((r for r in rules if r.take(request)), None)

    def _note(self, request: Message, outcome: str) -> None:
        with self._lock:
            self.seen.append(Seen(request.method, request.path, outcome))

    def start(self) -> ForwardingProxy:
        proxy = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                proxy._serve(self.connection, self.rfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, name=f"proxy-{self.port}", daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ForwardingProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _serve(self, client: socket.socket, client_in) -> None:  # noqa: ANN001
        client.settimeout(self.timeout)
        upstream: list = []  # [socket, its reader], opened on first use and again after the server closes it

        def forward(request: Message) -> Message:
            if self.latency:
                time.sleep(self.latency)
            for attempt in (1, 2):  # once more on a fresh connection if the kept one was closed meanwhile
                if not upstream:
                    connection = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=self.timeout)
                    upstream.extend([connection, connection.makefile("rb")])
                try:
                    upstream[0].sendall(request.encode())
                    response = read_response(upstream[1], request.method)
                except (ConnectionError, OSError):
                    self._close_upstream(upstream)
                    if attempt == 2:
                        raise
                    continue
                if (response.header("connection") or "").lower() == "close":
                    self._close_upstream(upstream)
                return response
            raise AssertionError("unreachable")

        try:
            while True:
                request = read_request(client_in, lambda: client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n"))
                if request is None:
                    return
                rule = self._rule_for(request)
                try:
                    if rule is None:
                        response = forward(request)
                        self._note(request, str(response.status))
                    else:
                        response = rule.fault.act(Exchange(request, forward))
                        self._note(request, rule.fault.name)
                except Lost:
                    self._note(request, rule.fault.name if rule else "lost")
                    return
                client.sendall(response.encode())
                if (request.header("connection") or "").lower() == "close":
                    return
        except (ConnectionError, OSError, ValueError):
            return
        finally:
            self._close_upstream(upstream)
            try:
                client.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    @staticmethod
    def _close_upstream(upstream: list) -> None:
        if upstream:
            try:
                upstream[0].close()
            finally:
                upstream.clear()
