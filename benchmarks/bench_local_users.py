"""What mapping many users costs the local sandbox (a root caller's; see docs/sandbox-local.md "Users").

For each mechanism (bubblewrap, unshare), against the one-uid map in the same run, samples
interleaved so both see the same load:

* box start: a new sandbox's ``start()`` + first ``shell("true")`` + ``close()``, with
  ``warm_spare=False`` (dirs, holder, the map, the shell; a reset keeps its box and its
  user namespace, so the map is paid when a box is built), while another sandbox holds the
  process's ``/etc`` template;
* the decision's one-off cost per process: ``usermap.range_conflicts()`` and the probe.

Usage (as root): ``python benchmarks/bench_local_users.py [--n N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path
from typing import Any

from timing import summary, timed, write_result

from agentunit_gym.backends.sandbox import usermap
from agentunit_gym.backends.sandbox.local import LocalSandbox

_real_switching = usermap.user_switching


def _one_uid(isolation: str = "auto") -> usermap.Support:
    return usermap.Support(False, "benchmark: one uid")


def bench_mechanism(mechanism: str, n: int) -> dict[str, Any]:
    def new_box(switching: Any, many: bool) -> None:
        usermap.user_switching = switching  # read by LocalSandbox.start (module attribute)
        try:
            with LocalSandbox(isolation=mechanism, warm_spare=False) as sb:  # type: ignore[arg-type]
                sb.shell("true")
                assert sb.multi_user is many
        finally:
            usermap.user_switching = _real_switching

    keep = LocalSandbox(isolation=mechanism, warm_spare=False)  # type: ignore[arg-type]
    keep.start()  # holds the shared /etc template
    samples: dict[str, list[float]] = {"many": [], "one": []}
    try:
        new_box(_real_switching, True)
        new_box(_one_uid, False)  # warm both ways
        for _ in range(n):
            samples["many"] += timed(lambda: new_box(_real_switching, True), 1)
            samples["one"] += timed(lambda: new_box(_one_uid, False), 1)
    finally:
        keep.close()
    many, one = summary(samples["many"]), summary(samples["one"])
    return {"new_box_many_users": many, "new_box_one_uid": one, "p50_added_ms": many["p50_ms"] - one["p50_ms"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--n", type=int, default=30)
    parser.add_argument("--json", type=Path, default=Path("benchmarks/results/local_users.json"))
    args = parser.parse_args()
    if os.geteuid() != 0 or not usermap.user_switching("auto").ok:
        print(f"many users are not mapped here: {usermap.user_switching('auto').reason}")
        return 1
    result: dict[str, Any] = {
        "benchmark": "local_users", "python": platform.python_version(), "cpus": os.cpu_count(),
        "measured_at": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_avg_1m_before": os.getloadavg()[0],
        "range_conflicts": summary(timed(usermap.range_conflicts, 10)),
        "probe": summary(timed(usermap._probe, 10)),
        "bwrap": bench_mechanism("bwrap", args.n),
        "unshare": bench_mechanism("unshare", args.n),
        "load_avg_1m_after": os.getloadavg()[0],
    }
    write_result(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
