"""A real two-node Ray cluster on this machine, for the ``--ray`` tests: a head and a second
node, each started with ``ray start --block`` in a process group of its own (so ending one
ends its raylet, workers and actors), each in its own temp dir, every port chosen free.

Both are ended by killing their process groups (never ``ray stop``, which would end every
Ray process of the machine, other users' included)."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

START_TIMEOUT_S = 150.0
"""How long one node may take to start (a few seconds when idle; a loaded 2-core machine is much slower)."""

HEALTH_CHECK_ENV = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "4",
                    "RAY_health_check_initial_delay_ms": "1000"}
"""The head notices a lost node within ~2-3 s instead of Ray's default ~15 s (the GCS reads ``RAY_<setting>``)."""


RAY_ENV = {"RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
"""For the nodes and the drivers of a test: one auth mode for all (a head finds a token file
some earlier ``ray.init`` left in ``~/.ray`` and would otherwise expect it), no usage stats."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class RayNode:
    process: subprocess.Popen[str]
    temp_dir: Path
    output: list[str] = field(default_factory=list)

    def kill(self) -> None:
        """SIGKILL the node's whole process group (raylet, workers, actors), then reap it."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)


def _ports(head: bool, taken: list[int]) -> list[str]:
    """Free ports for every Ray component of a node, and a range of 200 for its workers that
    holds none of them, nor ``taken`` (ports the caller gives it: the head's ``--port``)."""
    ports = ["--node-manager-port", "--object-manager-port", "--dashboard-agent-listen-port",
             "--dashboard-agent-grpc-port", "--runtime-env-agent-port", "--metrics-export-port"]
    if head:
        ports += ["--ray-client-server-port", "--dashboard-port"]
    args: list[str] = []
    chosen: list[int] = list(taken)
    for flag in ports:
        chosen.append(free_port())
        args += [flag, str(chosen[-1])]
    while True:
        low = free_port()
        if low > 65000:
            low -= 1000  # keep the range of 200 below 65535 (Ray skips ports in it that are taken)
        # Ray refuses a worker range that holds a port given to another of its components
        # (seen in CI: the dashboard port inside it).
        if not any(low <= port <= low + 200 for port in chosen):
            return [*args, "--min-worker-port", str(low), "--max-worker-port", str(low + 200)]


def start_node(args: list[str], head: bool) -> RayNode:
    """``ray start --block ARGS`` in a new process group; returns once it says it started.

    Raises:
        RuntimeError: it exited or did not start within :data:`START_TIMEOUT_S` (it is killed then).
    """
    temp_dir = Path(tempfile.mkdtemp(prefix="rayt", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    cmd = [sys.executable, "-m", "ray.scripts.scripts", "start", "--block", "--disable-usage-stats",
           "--num-cpus=1", "--object-store-memory=78643200", "--node-ip-address=127.0.0.1",
           f"--temp-dir={temp_dir}", *_ports(head, [int(a.split("=", 1)[1]) for a in args if a.startswith("--port=")]),
           *args]
    env = {**os.environ, **RAY_ENV, **(HEALTH_CHECK_ENV if head else {})}
    process = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               start_new_session=True)
    node = RayNode(process, temp_dir)
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        node.output.append(line)
        if "Ray runtime started" in line:
            return node
    node.kill()
    subprocess.run(["rm", "-rf", str(temp_dir)], check=False, timeout=60)
    raise RuntimeError("ray start did not start a node:\n" + "".join(node.output[-30:]))


@contextlib.contextmanager
def two_node_cluster() -> Iterator[tuple[str, RayNode, RayNode]]:
    """``(address, head, second node)``; both ended on exit, even on failure."""
    port = free_port()
    nodes: list[RayNode] = []
    try:
        nodes.append(start_node(["--head", f"--port={port}", "--include-dashboard=false"], head=True))
        nodes.append(start_node([f"--address=127.0.0.1:{port}"], head=False))
        yield f"127.0.0.1:{port}", nodes[0], nodes[1]
    finally:
        for node in reversed(nodes):
            node.kill()
        for node in nodes:
            subprocess.run(["rm", "-rf", str(node.temp_dir)], check=False, timeout=60)
