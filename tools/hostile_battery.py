"""The hostile battery: what an untrusted agent may throw at the OS env, on each sandbox backend.

Kept apart from the test suite (it plants files on the host, runs fork bombs and takes a
minute or two); run it by hand after changing a sandbox, and summarise its output in
docs/sandbox-local.md and docs/sandbox-docker.md::

    python tools/hostile_battery.py                     # docker (when a daemon answers) and local
    python tools/hostile_battery.py --backend local --isolation unshare
    python tools/hostile_battery.py --json results.json

Every check drives ``AgentUnit/OS-v0`` through its public API (``reset``/``step`` with the
agent's raw replies), prints one line (PASS/FAIL, seconds, what was seen), and the exit
status is the number of failed checks.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentunit_gym  # noqa: F401 - registers the ids
from agentunit_gym.backends import process

CHECKOUT = Path(__file__).resolve().parents[1]
COMMAND_TIMEOUT = 3.0
FORK_BOMB = ":(){ :|:& };:"


@dataclass
class Outcome:
    backend: str
    check: str
    passed: bool
    seconds: float
    detail: str


class Battery:
    """Runs the checks against one env (one backend); each check starts a fresh episode."""

    def __init__(self, env: gym.Env[str, str], task_id: str) -> None:
        self.env = env
        self.task_id = task_id

    def episode(self) -> None:
        self.env.reset(options={"task_id": self.task_id})

    def bash(self, command: str) -> tuple[str, dict[str, Any], float]:
        started = time.monotonic()
        obs, _, terminated, truncated, info = self.env.step(f"Think: probe.\nAct: bash\n```bash\n{command}\n```")
        elapsed = time.monotonic() - started
        if terminated or truncated:
            self.episode()
        return obs, info, elapsed

    @staticmethod
    def value(out: str, key: str) -> str:
        """The word after ``key=`` in a command's output (observations carry a prefix of the env's)."""
        match = re.search(rf"{key}=(\S*)", out)
        return match.group(1) if match else "<missing>"

    # ------------------------------------------------------------------ the checks

    def fork_bomb(self) -> tuple[bool, str]:
        self.episode()
        self.bash("sleep 600 &")
        obs, _, _ = self.bash(FORK_BOMB)
        times = []
        for word in ("one", "two", "three"):
            out, _, elapsed = self.bash(f"echo {word}")
            times.append(elapsed)
            if word not in out or elapsed > 2.0:
                return False, f"after the bomb, 'echo {word}' gave {out[-120:]!r} in {elapsed:.2f} s"
        jobs, _, _ = self.bash("jobs")
        survived = "sleep 600" in jobs
        return survived, f"3 commands answered in {max(times):.2f} s at most; earlier job alive: {survived}; " \
                         f"bomb reply ends {obs.strip()[-80:]!r}"

    def hung_reads(self) -> tuple[bool, str]:
        self.episode()
        seen = []
        for command in ("cat", "read -r line", "sleep 1000", "tail -f /dev/null", "python3 -c 'input()'"):
            _, info, elapsed = self.bash(command)
            if elapsed > COMMAND_TIMEOUT + 4:
                return False, f"{command!r} took {elapsed:.1f} s"
            seen.append(f"{command.split()[0]} {elapsed:.1f}s")
        out, _, _ = self.bash("echo still-here")
        return "still-here" in out, "; ".join(seen)

    def unbounded_output(self) -> tuple[bool, str]:
        self.episode()
        obs, info, elapsed = self.bash("yes 'all work and no play'")
        obs2, info2, elapsed2 = self.bash("head -c 50000000 /dev/zero | tr '\\0' x; echo END")
        out, _, _ = self.bash("echo next")
        ok = len(obs) < 5000 and len(obs2) < 5000 and "next" in out
        return ok, f"yes: {len(obs)} chars shown in {elapsed:.1f} s; 50 MB: {len(obs2)} chars in {elapsed2:.1f} s"

    def background_jobs(self) -> tuple[bool, str]:
        self.episode()
        self.bash("python3 -m http.server 8765 --bind 127.0.0.1 >/dev/null 2>&1 &")
        out, _, _ = self.bash("for i in 1 2 3 4 5 6 7 8 9 10; do "
                              "python3 -c \"import urllib.request as u; print(u.urlopen('http://127.0.0.1:8765/')"
                              ".status)\" 2>/dev/null && break; sleep 0.3; done")
        later, _, _ = self.bash("sleep 1; jobs")
        ok = "200" in out and "python3 -m http.server" in later
        return ok, f"server answered: {'200' in out}; still a job after two more commands: {'http.server' in later}"

    def network(self) -> tuple[bool, str]:
        self.episode()
        probe = ("python3 - <<'EOF'\nimport socket\n"
                 "for host in ('1.1.1.1', 'deb.debian.org', '10.0.0.1'):\n"
                 "    try:\n        socket.create_connection((host, 80), timeout=2).close(); print(host, 'OPEN')\n"
                 "    except OSError as exc:\n        print(host, 'blocked', type(exc).__name__)\nEOF\n"
                 "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '")
        out, _, _ = self.bash(probe)
        return "OPEN" not in out and out.count("blocked") == 3, " ".join(out.split())[:200]

    def docker_socket(self) -> tuple[bool, str]:
        self.episode()
        out, _, _ = self.bash("test -S /var/run/docker.sock || test -S /run/docker.sock; echo sock=$?; "
                              "echo found=$(find / \\( -name 'docker.sock' -o -name 'containerd.sock' \\) "
                              "2>/dev/null | wc -l)")
        sock, found = self.value(out, "sock"), self.value(out, "found")
        return sock == "1" and found == "0", f"docker.sock present: {sock == '0'}; sockets found by find: {found}"

    def host_canaries(self) -> tuple[bool, str]:
        name = f"hostile-canary-{secrets.token_hex(5)}"
        planted = [Path(d) / name for d in ("/etc", "/root", "/home", "/var/tmp", "/tmp", "/opt", str(CHECKOUT))]
        made = []
        for path in planted:
            try:
                path.write_text("host secret\n")
                made.append(path)
            except OSError:
                continue
        try:
            self.episode()
            leaks = []
            for path in made:
                out, _, _ = self.bash(f"cat {path} 2>/dev/null; echo listed=$(ls -a {path.parent} 2>/dev/null "
                                      f"| grep -c {name})")
                if "host secret" in out or self.value(out, "listed") != "0":
                    leaks.append(str(path))
            out, _, _ = self.bash(f"echo found=$(find / -name '{name}' 2>/dev/null | wc -l)")
            found = self.value(out, "found")
            shadow, _, _ = self.bash("cat /etc/shadow 2>/dev/null | cut -d: -f1 | tr '\\n' ' '")
            host_users = {line.split(":")[0] for line in Path("/etc/shadow").read_text().splitlines()} - {
                "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy",
                "www-data", "backup", "list", "irc", "_apt", "nobody", "gnats"} if os.access("/etc/shadow", os.R_OK) \
                else set()
            shadow_leak = sorted(u for u in host_users if u in shadow.split())
            ok = not leaks and found == "0" and not shadow_leak
            return ok, (f"{len(made)} canaries planted; visible: {leaks or 'none'}; found by find: {found}; "
                        f"host-only users in the sandbox's shadow: {shadow_leak or 'none'}")
        finally:
            for path in made:
                path.unlink(missing_ok=True)

    def state_leaks(self) -> tuple[bool, str]:
        self.episode()
        self.bash("echo leak > /root/leak; echo leak > /tmp/leak; export LEAK=1; alias ll=leak; cd /tmp; "
                  "(setsid sleep 900 >/dev/null 2>&1 &); sleep 901 &")
        self.episode()
        out, _, _ = self.bash("echo files=$(ls /root/leak /tmp/leak 2>/dev/null | wc -l) var=[${LEAK:-}] "
                              "cwd=$(pwd) alias=$(alias ll >/dev/null 2>&1 && echo kept || echo gone); "
                              "n=0; for f in /proc/[0-9]*/cmdline; do grep -q 'sleep' $f 2>/dev/null && n=$((n+1)); "
                              "done; echo sleeps=$n")
        seen = {key: self.value(out, key) for key in ("files", "var", "cwd", "alias", "sleeps")}
        ok = seen == {"files": "0", "var": "[]", "cwd": "/root", "alias": "gone", "sleeps": "0"}
        return ok, " ".join(f"{k}={v}" for k, v in seen.items())

    def rm_rf_root(self) -> tuple[bool, str]:
        keep = CHECKOUT / "README.md"
        before = keep.read_bytes()
        self.episode()
        _, info, elapsed = self.bash("rm -rf --no-preserve-root / 2>/dev/null; echo done")
        self.episode()
        out, _, _ = self.bash("echo count=$(ls /usr/bin | wc -l); head -1 /etc/passwd")
        count = int(self.value(out, "count")) if self.value(out, "count").isdigit() else 0
        ok = keep.read_bytes() == before and count > 100 and "root:" in out
        return ok, f"rm -rf / took {elapsed:.1f} s; host checkout intact; after reset /usr/bin has {count} entries"

    def malformed_replies(self) -> tuple[bool, str]:
        self.episode()
        replies = ["", "Act: bash\n```bash\n", "\x00\xff\ufffd" * 50, "Act: " + "x" * 200_000,
                   '{"name": 1, "arguments": []}', "Act: answer(", "Act: rm -rf /", "Think: only thinking",
                   "Act: bash\n```python\nprint(1)\n```", "Act: finish(now)" * 1000]
        kinds = []
        for reply in replies:
            try:
                obs, _, terminated, truncated, info = self.env.step(reply)
            except Exception as exc:  # noqa: BLE001 - the battery reports, it does not stop
                return False, f"{reply[:30]!r} raised {type(exc).__name__}: {exc}"
            kinds.append(str(info.get("finish_reason") or info.get("action_issue") or "obs"))
            if terminated or truncated:
                self.episode()
        out, _, _ = self.bash("echo alive")
        return "alive" in out, f"{len(replies)} malformed replies, no exception; outcomes: {sorted(set(kinds))}"

    def nested_shells(self) -> tuple[bool, str]:
        # Shells three deep; in the innermost a fork bomb, hung reads and a loop that ignores
        # Ctrl-C: every command must come back within its timeout, in a shell that still answers.
        self.episode()
        self.bash("cd /tmp; export OUTER=kept")
        for shell in ("bash", "sh", "bash"):
            out, info, elapsed = self.bash(shell)
            if info.get("timed_out") or elapsed > 2.0:
                return False, f"{shell!r} did not take over: {out[-120:]!r} in {elapsed:.1f} s"
        seen = []
        for command in (FORK_BOMB, "cat", "sleep 1000", "trap '' INT; while :; do :; done"):
            _, _, elapsed = self.bash(command)
            seen.append(f"{command.split()[0][:8]} {elapsed:.1f}s")
            if elapsed > COMMAND_TIMEOUT + 6:
                return False, f"{command!r} took {elapsed:.1f} s"
        level, _, _ = self.bash("echo level=$SHLVL")
        for _ in range(2):  # the innermost bash was ended with its loop: sh and bash are left
            self.bash("exit")
        out, _, _ = self.bash('echo "outer=$OUTER"; pwd')
        ok = "outer=kept" in out and "/tmp" in out
        return ok, "; ".join(seen) + f"; after the loop: {self.value(level, 'level')}; back out: {ok}"

    CHECKS: tuple[str, ...] = ("fork_bomb", "hung_reads", "unbounded_output", "background_jobs", "network",
                               "docker_socket", "host_canaries", "state_leaks", "rm_rf_root", "malformed_replies",
                               "nested_shells")


def run_battery(backend: str, options: dict[str, Any], report: Callable[[Outcome], None]) -> list[Outcome]:
    env = gym.make("AgentUnit/OS-v0", backend=backend, max_steps=1000, command_timeout=COMMAND_TIMEOUT, **options)
    outcomes = []
    try:
        base = env.unwrapped
        task_id = next(t.id for t in base.tasks)  # type: ignore[attr-defined]
        battery = Battery(env, task_id)
        label = backend + (f"-{options['isolation']}" if "isolation" in options else "")
        for name in Battery.CHECKS:
            started = time.monotonic()
            try:
                passed, detail = getattr(battery, name)()
            except Exception as exc:  # noqa: BLE001 - a crash is a failed check, reported
                passed, detail = False, f"{type(exc).__name__}: {exc}"
                battery.episode()
            outcome = Outcome(label, name, passed, time.monotonic() - started, detail)
            report(outcome)
            outcomes.append(outcome)
    finally:
        env.close()
    return outcomes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", action="append", choices=["docker", "local"],
                        help="backends to attack (default: docker when a daemon answers, and local)")
    parser.add_argument("--isolation", choices=["bwrap", "unshare"], help="the local sandbox's mechanism")
    parser.add_argument("--json", type=Path, help="also write the outcomes here")
    args = parser.parse_args(argv)
    backends = args.backend or (["docker"] if process.docker_available() else []) + ["local"]
    if os.geteuid() != 0:
        print("note: not root, so canaries can only be planted where this user may write", file=sys.stderr)

    def report(o: Outcome) -> None:
        print(f"{o.backend:14} {o.check:18} {'PASS' if o.passed else 'FAIL'} {o.seconds:6.1f}s  {o.detail}",
              flush=True)

    outcomes: list[Outcome] = []
    for backend in backends:
        options = {"isolation": args.isolation} if backend == "local" and args.isolation else {}
        outcomes += run_battery(backend, options, report)
    failed = [o for o in outcomes if not o.passed]
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} checks passed"
          + (f"; failed: {', '.join(f'{o.backend}/{o.check}' for o in failed)}" if failed else ""))
    if args.json:
        args.json.write_text(json.dumps([asdict(o) for o in outcomes], indent=1))
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
