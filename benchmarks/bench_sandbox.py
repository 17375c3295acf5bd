"""Docker sandbox benchmark: in-place reset and persistent-shell steps vs the naive ways.

Both sides run in the same process on the same daemon, so the ratios hold on a noisy machine:

* reset: ``DockerSandbox.reset()`` after a dirtying step, vs a new container per episode
  (remove the old one, create and start a new one from the same image, run one command);
* fallback: a reset after the container was killed, served by the warm pool (plus one step);
* step overhead: a ``shell("true")`` round trip (``true`` is a builtin, so this is all
  overhead), vs ``docker exec`` of ``true`` per command (exec create + start + inspect);
  also the same step in a nested shell (after ``shell("bash")``), and entering and leaving
  one (``bash`` then ``exit``).

Usage: ``python benchmarks/bench_sandbox.py [--episodes N] [--baseline N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

from timing import summary, timed

from agentunit_gym.backends import process
from agentunit_gym.backends.images import LABEL, ensure_image
from agentunit_gym.backends.sandbox.docker import DockerSandbox

TARGETS_MS = {"reset_p50": 30.0, "step_overhead_p50": 2.0}






def bench(episodes: int, baseline_episodes: int, steps: int, pool_episodes: int = 8) -> dict[str, Any]:
    client = process.docker_client()
    image = ensure_image("os", client=client)
    results: dict[str, Any] = {"image": image, "machine": platform.machine(), "python": platform.python_version()}

    with DockerSandbox(client=client, image=image, pool_size=0) as sandbox:
        sandbox.start()
        sandbox.shell("true")

        def episode_in_place() -> None:
            sandbox.reset()
            sandbox.shell("echo x > /tmp/f; cd /opt; sleep 100 &")

        resets: list[float] = []
        for _ in range(episodes):
            sandbox.shell("echo dirty > /etc/dirty; useradd -M u$RANDOM; sleep 100 &")
            start = time.perf_counter()
            sandbox.reset()
            resets.append((time.perf_counter() - start) * 1000)
        results["reset_in_place"] = summary(resets)
        results["episode_in_place"] = summary(timed(episode_in_place, episodes))
        results["step_persistent_shell"] = summary(timed(lambda: sandbox.shell("true"), steps))
        # The same step in a shell the agent started (`bash`), and entering plus leaving one.
        if sandbox.shell("bash").exit_code != 0:
            raise RuntimeError("no nested shell")
        results["step_nested_shell"] = summary(timed(lambda: sandbox.shell("true"), steps))
        sandbox.shell("exit")

        def enter_and_exit() -> None:
            if sandbox.shell("bash").exit_code != 0 or sandbox.shell("exit").exit_code != 0:
                raise RuntimeError("nested shell round trip failed")

        results["nested_shell_enter_exit"] = summary(timed(enter_and_exit, max(10, steps // 10)))
        results["recreated"] = sandbox.recreated

        # docker exec per command, against the same running container.
        container = sandbox.container_name

        def exec_true() -> None:
            exec_id = client.api.exec_create(container, ["true"])["Id"]
            client.api.exec_start(exec_id)
            if client.api.exec_inspect(exec_id)["ExitCode"] != 0:
                raise RuntimeError("docker exec true failed")

        results["step_docker_exec"] = summary(timed(exec_true, max(10, steps // 10)))

    # The fallback: the container died (killed from outside here), a warm spare takes over.
    with DockerSandbox(client=client, image=image, pool_size=1) as pooled:
        pooled.start()
        swaps: list[float] = []
        for _ in range(pool_episodes):
            deadline = time.monotonic() + 60
            while not pooled._pool and time.monotonic() < deadline:  # wait for the refill, bounded
                time.sleep(0.01)
            client.api.kill(pooled.container_name)
            start = time.perf_counter()
            pooled.reset()
            pooled.shell("true")
            swaps.append((time.perf_counter() - start) * 1000)
        results["reset_from_warm_pool"] = summary(swaps)

    # New container per episode: what a reset replaces in the naive design.
    host_config = client.api.create_host_config(network_mode="none", init=True, log_config={"type": "none"})
    current: list[str] = []

    def episode_new_container() -> None:
        if current:
            client.api.remove_container(current.pop(), force=True)
        cid = client.api.create_container(image, ["sleep", "infinity"], host_config=host_config,
                                          labels={LABEL: "1", f"{LABEL}.kind": "bench"})["Id"]
        client.api.start(cid)
        current.append(cid)
        exec_id = client.api.exec_create(cid, ["sh", "-c", "echo x > /tmp/f"])["Id"]
        client.api.exec_start(exec_id)

    try:
        results["episode_new_container"] = summary(timed(episode_new_container, baseline_episodes))
    finally:
        for cid in current:
            client.api.remove_container(cid, force=True)
    client.close()

    reset_p50 = results["reset_in_place"]["p50_ms"]
    step_p50 = results["step_persistent_shell"]["p50_ms"]
    results["ratios"] = {
        "episode_speedup_vs_new_container": results["episode_new_container"]["p50_ms"]
        / results["episode_in_place"]["p50_ms"],
        "reset_speedup_vs_new_container": results["episode_new_container"]["p50_ms"] / reset_p50,
        "step_speedup_vs_docker_exec": results["step_docker_exec"]["p50_ms"] / step_p50,
    }
    results["targets_met"] = {"reset_p50<=30ms": reset_p50 <= TARGETS_MS["reset_p50"],
                              "step_overhead_p50<=2ms": step_p50 <= TARGETS_MS["step_overhead_p50"]}
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=100, help="in-place episodes (default 100)")
    parser.add_argument("--baseline", type=int, default=20, help="new-container episodes (default 20)")
    parser.add_argument("--steps", type=int, default=300, help="persistent-shell steps (default 300)")
    parser.add_argument("--json", type=Path, help="write the results here as JSON")
    args = parser.parse_args()
    results = bench(args.episodes, args.baseline, args.steps)

    from rich.console import Console
    from rich.table import Table

    table = Table(title="Docker sandbox (ms)")
    for column in ("measure", "n", "p50", "p90", "mean"):
        table.add_column(column, justify="right" if column != "measure" else "left")
    for key in ("reset_in_place", "episode_in_place", "reset_from_warm_pool", "episode_new_container",
                "step_persistent_shell", "step_nested_shell", "nested_shell_enter_exit", "step_docker_exec"):
        row = results[key]
        table.add_row(key, str(row["n"]), f"{row['p50_ms']:.2f}", f"{row['p90_ms']:.2f}", f"{row['mean_ms']:.2f}")
    console = Console()
    console.print(table)
    for name, ratio in results["ratios"].items():
        console.print(f"{name}: {ratio:.1f}x")
    for name, met in results["targets_met"].items():
        console.print(f"target {name}: {'met' if met else 'MISSED'}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
        console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
