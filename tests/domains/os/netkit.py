"""A TCP server on the host for network tests, and the address a sandbox reaches it at.

Nothing here touches the internet: the server listens on every host address, and a sandbox
with the network reaches it at the host's non-loopback address (local: the host's own
namespace) or at the Docker bridge's gateway (docker). Without the network neither answers.
"""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest


@dataclass
class TokenServer:
    """An HTTP server that answers every GET with :attr:`token` and counts the requests."""

    port: int
    token: str
    hits: list[str] = field(default_factory=list)


@contextlib.contextmanager
def token_server(token: str) -> Iterator[TokenServer]:
    """Serve ``token`` over HTTP on every host address (a free port) until the block ends."""
    state = TokenServer(0, token)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's hook name
            state.hits.append(self.client_address[0])
            body = token.encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the stdlib's signature
            pass

    server = http.server.ThreadingHTTPServer(("0.0.0.0", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def host_address(backend: str) -> str:
    """Where a sandbox of ``backend`` with the network reaches a server on the host (never loopback)."""
    if backend == "docker":
        from agentunit_gym.backends.process import docker_client

        config = docker_client(timeout=10.0).networks.get("bridge").attrs["IPAM"]["Config"]
        gateways = [c["Gateway"] for c in config if c.get("Gateway") and ":" not in c["Gateway"]]
        if not gateways:
            pytest.skip("Docker's bridge network has no IPv4 gateway here")
        return str(gateways[0])
    # The source address of the default route (a UDP connect sends nothing).
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))
        except OSError:
            pytest.skip("this host has no IPv4 route off loopback")
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        pytest.skip("this host has no non-loopback IPv4 address")
    return address
