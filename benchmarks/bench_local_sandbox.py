"""Local sandbox benchmark: reset and persistent-shell steps vs the naive ways, in the same run.

* reset: ``LocalSandbox.reset()`` after a dirtying step (files, a background job), timed
  together with the first command of the next episode: in place (the default: the box and
  its namespaces stay), and replacing the box as every reset did before (the box marked
  tainted, which makes reset take a new one: the warm spare, built in the background), in
  three settings: episodes back to back (the spare is still starting when the next reset
  comes), episodes of 100 ms (the spare is ready), and without a warm spare; vs a new
  sandbox per episode (create, start, first command, close);
* step overhead: a ``shell("true")`` round trip (``true`` is a builtin, so this is all
  overhead), vs a one-off ``run("true")`` per command (enter the namespaces and start a bash
  each time, the local analogue of ``docker exec`` per command), and the floor of starting
  ``bash -c true`` on the host with no isolation at all; also the same step in a nested
  shell (after ``shell("bash")``), and entering and leaving one (``bash`` then ``exit``).

Usage: ``python benchmarks/bench_local_sandbox.py [--episodes N] [--steps N] [--json PATH]``
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from timing import summary, timed

from agentunit_gym.backends.sandbox.local import LocalSandbox


def bench(episodes: int, steps: int, isolation: str) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": platform.machine(), "python": platform.python_version()}
    def resets(sandbox: LocalSandbox, pause_s: float, replace: bool = False) -> list[float]:
        samples = []
        for _ in range(episodes):
            sandbox.shell("echo x > /tmp/f; mkdir -p /root/a/b; sleep 100 &")
            time.sleep(pause_s)  # the rest of the episode (the agent thinking), not timed
            if replace:
                assert sandbox._box is not None
                sandbox._box.tainted = True  # reset then replaces the box, as before
            start = time.perf_counter()
            sandbox.reset()
            sandbox.shell("true")
            samples.append((time.perf_counter() - start) * 1000)
        return samples

    with LocalSandbox(isolation=isolation) as sandbox:  # type: ignore[arg-type]
        results["mechanism"] = sandbox.mechanism
        sandbox.shell("true")
        in_place = resets(sandbox, 0.0)
        back_to_back = resets(sandbox, 0.0, replace=True)
        with_pause = resets(sandbox, 0.1, replace=True)
        steps_ms = timed(lambda: sandbox.shell("true"), steps)
        # The same step in a shell the agent started (`bash`), and entering plus leaving one.
        if sandbox.shell("bash").exit_code != 0:
            raise RuntimeError("no nested shell")
        nested_ms = timed(lambda: sandbox.shell("true"), steps)
        sandbox.shell("exit")

        def enter_and_exit() -> None:
            if sandbox.shell("bash").exit_code != 0 or sandbox.shell("exit").exit_code != 0:
                raise RuntimeError("nested shell round trip failed")

        enter_exit_ms = timed(enter_and_exit, max(10, steps // 10))
        run_ms = timed(lambda: sandbox.run("true"), max(20, steps // 10))
    with LocalSandbox(isolation=isolation, warm_spare=False) as sandbox:  # type: ignore[arg-type]
        no_spare = resets(sandbox, 0.0, replace=True)

    def new_sandbox_episode() -> None:
        with LocalSandbox(isolation=isolation) as fresh:  # type: ignore[arg-type]
            fresh.shell("true")

    naive_ms = timed(new_sandbox_episode, max(10, episodes // 2))
    floor_ms = timed(lambda: subprocess.run(["bash", "-c", "true"], check=True), 50)

    results["reset_in_place"] = summary(in_place)
    results["reset_replacing_box_episodes_of_100ms"] = summary(with_pause)
    results["reset_replacing_box_back_to_back"] = summary(back_to_back)
    results["reset_replacing_box_without_spare"] = summary(no_spare)
    results["new_sandbox_per_episode"] = summary(naive_ms)
    results["step"] = summary(steps_ms)
    results["step_nested_shell"] = summary(nested_ms)
    results["nested_shell_enter_exit"] = summary(enter_exit_ms)
    results["run_per_command"] = summary(run_ms)
    results["host_bash_c_true"] = summary(floor_ms)
    naive = results["new_sandbox_per_episode"]["p50_ms"]
    results["reset_speedup_vs_new_sandbox"] = {
        name: round(naive / results[name]["p50_ms"], 1)
        for name in ("reset_in_place", "reset_replacing_box_episodes_of_100ms", "reset_replacing_box_back_to_back",
                     "reset_replacing_box_without_spare")}
    results["step_speedup_vs_run_per_command"] = round(
        results["run_per_command"]["p50_ms"] / results["step"]["p50_ms"], 1)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=40)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--isolation", default="auto", choices=["auto", "bwrap", "unshare"])
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    results = bench(args.episodes, args.steps, args.isolation)
    text = json.dumps(results, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()
