"""CPU cost of the local sandbox's start and reset: what 64 env copies pay on a 2-core machine.

Wall-clock latency (bench_local_sandbox.py) hides the cost of the warm spare, which is built
in a background thread; at high concurrency the CPU it takes is what runs out. Measured
here, as CPU seconds of this process and its reaped children (bwrap, setpriv, the shell),
each against the way it was done before, in the same run:

* start: ``LocalSandbox.start()`` + ``close()`` of a second sandbox while a first one is
  open (so the process's shared ``/etc`` template exists), against the way before: a
  template built for each sandbox (``build_etc``: ~800 files copied from the host's /etc)
  and every dir in the system temp dir;
* reset: ``reset()`` after a dirtying command, in place (the default) against replacing the
  box as every reset did before (the box marked tainted, which makes reset take a new one:
  the warm spare, built in the background), both with the box dirs where they go by default
  (``default_temp_parent()``: ``/dev/shm`` when it is a shared tmpfs); and replacing the box
  with the dirs in the system temp dir (``temp_dir=tempfile.gettempdir()``, on disk here).
  (An ``in_place_own_dev`` row, bubblewrap's ``--dev /dev`` in every shell as from 2026-11-24
  to 2026-11-26, was dropped on 2026-11-27: its shell no longer answered, already on 0c1d646.)
  Reset also costs CPU outside this process (the kernel taking namespaces down in its
  workers), so reset is also measured as the whole machine's busy time (/proc/stat): run it
  on a quiet machine.

Usage: ``python benchmarks/bench_local_cpu.py [--starts N] [--resets N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from timing import machine_busy_s, own_cpu_s, write_result

from agentunit_gym.backends.sandbox import local
from agentunit_gym.backends.sandbox.local import LocalSandbox


def cpu_per_call_ms(fn: Callable[[], object], n: int) -> float:
    """Mean CPU milliseconds of ``fn()``; a second's pause after, so background work is counted."""
    fn()  # warm
    start = own_cpu_s()
    for _ in range(n):
        fn()
    time.sleep(1.0)  # the last warm spare finishing in its thread
    return 1000 * (own_cpu_s() - start) / n


def bench_start(n: int) -> dict[str, float]:
    """Now: the process's shared template, on the default temp dir. Before: a template built
    for each sandbox, everything in the system temp dir."""
    keep = LocalSandbox(warm_spare=False)
    keep.start()  # holds the shared template for the whole measurement
    try:
        def start_close() -> None:
            with LocalSandbox(warm_spare=False) as sb:
                sb.start()

        now = cpu_per_call_ms(start_close, n)

        def start_close_before() -> None:
            sb = LocalSandbox(warm_spare=False, temp_dir=tempfile.gettempdir())
            own = Path(tempfile.mkdtemp(prefix="bench-etc-"))
            try:
                local.build_etc(own / "etc")  # what each sandbox did before the template was shared
                sb.start()
            finally:
                sb.close()
                shutil.rmtree(own, ignore_errors=True)

        before = cpu_per_call_ms(start_close_before, n)
    finally:
        keep.close()
    return {"now_ms": now, "before_ms": before, "ratio": before / now}


def bench_reset(n: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for label, temp_dir, replace in (("in_place", None, False), ("replacing_box", None, True),
                                     ("replacing_box_system_temp", tempfile.gettempdir(), True)):
        with LocalSandbox(temp_dir=temp_dir) as sb:
            sb.start()

            def dirty_reset(sb: LocalSandbox = sb, replace: bool = replace) -> None:
                sb.shell("echo x > /tmp/f; mkdir -p /root/a/b; echo u >> /etc/passwd; sleep 100 &")
                if replace:
                    assert sb._box is not None
                    sb._box.tainted = True  # reset then replaces the box, as before
                sb.reset()

            busy = machine_busy_s()
            out[f"{label}_ms"] = cpu_per_call_ms(dirty_reset, n)
            out[f"{label}_machine_ms"] = 1000 * (machine_busy_s() - busy) / (n + 1)
            assert sb.host_dir is not None
            out[f"{label}_dir"] = str(sb.host_dir.parent)
    out["ratio"] = out["replacing_box_ms"] / out["in_place_ms"]
    out["machine_ratio"] = out["replacing_box_machine_ms"] / out["in_place_machine_ms"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--resets", type=int, default=60)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/local_cpu.json"))
    args = parser.parse_args()
    result = {"benchmark": "local_cpu", "python": platform.python_version(), "cpus": os.cpu_count(),
              "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "load_avg_1m_before": os.getloadavg()[0],
              "start": bench_start(args.starts), "reset": bench_reset(args.resets),
              "load_avg_1m_after": os.getloadavg()[0]}
    write_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
