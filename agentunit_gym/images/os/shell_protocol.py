"""The agent's shell protocol, one for both sandboxes: the docker supervisor and the local sandbox.

What lives here, and nowhere else:

* **Sentinel framing.** After each command the shell prints ``<RS>AU<nonce>:<status><RS>``
  (RS is the byte 0x1e; the nonce is 16 random hex digits, new for every line). The line
  that asks for it spells RS as ``\\036`` inside ``printf``'s format, so the line itself never
  holds a sentinel, and a random nonce cannot be printed by accident. :class:`Capture` finds
  it in the output, even split across reads.
* **Nested shells.** A command that starts another interactive shell (``bash``, ``sh``,
  ``su - jack``) hands it the terminal, as in a terminal: :func:`interactive_shell` tells
  such a shell, :class:`Level` writes the lines it is sent, :func:`settle` says which
  shells have exited when a lower shell's sentinel shows. :data:`SHELL_SETUP` is what a new
  level is told first.
* **Runaways.** :func:`is_flood` decides whether what a command left running is a fork bomb
  (kill it) or a deliberate background job (keep it), with the same budget and watch time.
* **Notes** the agent reads when we step in.
* **The agent's OOM score** (:data:`AGENT_OOM_SCORE_ADJ`), set by both sandboxes on the
  processes they start for the agent.

Standard library only: the docker sandbox sends this file into the container with the
supervisor (``images/os/supervisor.py``), where only the image's python3 runs it.
"""

from __future__ import annotations

import os
import secrets
import termios
import time
from collections.abc import Callable, Iterable, Sequence

SENTINEL_HEAD = b"\x1eAU"
SENTINEL_END = b"\x1e"
SENTINEL_MAX = 48
"""Longest sentinel (``<RS>AU<nonce>:<status><RS>``): a tail that may begin one is held back."""
PENDING_CAP = 1 << 16
"""Most output kept of what follows a sentinel (a background job writing between commands),
shown with the next command."""

DEFAULT_RUNAWAY_BUDGET = 32
"""How many processes one command may leave running (a server, a few workers) before they
count as runaways (a fork bomb) and are killed, so the next command can fork."""
RUNAWAY_WATCH_S = 0.5
"""How long what a command left behind is watched while it keeps growing."""
RUNAWAY_STILL_S = 0.15
"""How long what a command left may stand still before it counts as deliberate (a server, a
few jobs): past one CFS period (100 ms), for which a box over its ``cpus=`` is held still."""
RUNAWAY_THROTTLED_WATCH_S = 2.0
"""How long what a command left is watched at most while the box's CPU limit holds it still
(a loaded machine may hold a throttled box still for several periods)."""

AGENT_OOM_SCORE_ADJ = 500
"""``oom_score_adj`` of the agent's processes (its shell, its commands, one-off commands) on
both backends: at the memory limit the kernel kills one of them, never the supervisor or the
local box's holder (at 0), whatever their sizes. Raising it needs no privilege (lowering
below 0 needs CAP_SYS_RESOURCE, which dockerd may lack). Children inherit it, so among the
agent's processes the biggest goes: the command that ran memory up, not its small shell."""


def new_nonce() -> str:
    """A fresh nonce for one command's sentinel."""
    return secrets.token_hex(8)


def sentinel_printf(nonce: str) -> str:
    """``printf``'s format for ``nonce``'s sentinel, with the status as ``%d`` (RS spelled ``\\036``)."""
    return f"\\036AU{nonce}:%d\\036"


def quote(text: str) -> str:
    """Bash ANSI-C quoting on one line: the whole command reaches bash before it runs."""
    out = ["$'"]
    for byte in text.encode("utf-8", "surrogateescape"):
        ch = chr(byte)
        if ch == "'" or ch == "\\":
            out.append("\\" + ch)
        elif 32 <= byte < 127:
            out.append(ch)
        else:
            out.append(f"\\x{byte:02x}")
    out.append("'")
    return "".join(out)


class Capture:
    """Keeps the first ``limit`` bytes of a stream, counts the rest, and finds a sentinel.

    ``accept`` holds the nonces whose sentinel ends the read: the command's own, and those
    of the lines still running in the shells below a nested one (their sentinel means the
    nested shells have exited). Anything else that looks like a sentinel is output. Without
    ``accept`` everything is output. What follows the sentinel in the same read is kept in
    ``after`` (at most :data:`PENDING_CAP` bytes).
    """

    def __init__(self, limit: int, accept: set[str] | None = None) -> None:
        self.limit, self.accept = limit, accept
        self.kept = bytearray()
        self.total = 0
        self.pending = b""  # bytes held back because they may be the start of a sentinel
        self.found: int | None = None  # exit code once a sentinel was seen
        self.found_nonce: str | None = None
        self.after = b""

    def expect(self, accept: set[str]) -> None:
        """Look for the sentinels of ``accept`` from now on (the output so far is kept)."""
        self.accept = accept
        self.found = self.found_nonce = None

    def _take(self, data: bytes) -> None:
        self.total += len(data)
        room = self.limit - len(self.kept)
        if room > 0:
            self.kept += data[:room]

    def feed(self, data: bytes) -> None:
        """Take ``data``; once a sentinel of ``accept`` is in it, ``found`` is set and the rest goes to ``after``."""
        if self.accept is None:
            self._take(data)
            return
        data = self.pending + data
        self.pending = b""
        start = 0
        while True:
            at = data.find(SENTINEL_HEAD, start)
            if at < 0:
                break
            end = data.find(SENTINEL_END, at + len(SENTINEL_HEAD))
            if end < 0:
                if len(data) - at <= SENTINEL_MAX:  # may be a sentinel still arriving
                    self._take(data[:at])
                    self.pending = data[at:]
                    return
                start = at + 1
                continue
            nonce, _, digits = data[at + len(SENTINEL_HEAD):end].partition(b":")
            name = nonce.decode("ascii", "replace")
            if name in self.accept:
                self._take(data[:at])
                self.found = int(digits) if digits.isdigit() else -1
                self.found_nonce = name
                self.after = data[end + 1:][:PENDING_CAP]
                return
            start = at + 1
        # Hold back a tail only if it could begin a sentinel.
        cut = len(data)
        tail = data.rfind(SENTINEL_END, max(0, len(data) - len(SENTINEL_HEAD) + 1))
        if tail >= 0 and SENTINEL_HEAD.startswith(data[tail:]):
            cut = tail
        self._take(data[:cut])
        self.pending = data[cut:]

    def note(self, text: str) -> None:
        """Append a line of ours to what the agent reads (counted like output)."""
        self._take(text.encode())

    def drop_partial_line(self) -> None:
        """Drop what follows the last newline: a new shell's first prompt."""
        self.pending = b""
        cut = self.kept.rfind(b"\n") + 1
        if cut < len(self.kept) and self.total == len(self.kept):
            self.total -= len(self.kept) - cut
            del self.kept[cut:]

    def finish(self) -> None:
        """No sentinel is coming: what was held back is output."""
        if self.pending:
            self._take(self.pending)
            self.pending = b""

    @property
    def truncated(self) -> bool:
        return self.total > len(self.kept)

    def text(self) -> str:
        return bytes(self.kept).decode("utf-8", errors="replace")


SHELL_NAMES = frozenset({"bash", "rbash", "sh", "dash", "ash", "zsh", "ksh", "ksh93", "mksh", "yash", "posh",
                         "busybox"})
"""POSIX-style shells: started without a command or script, they read commands from the
terminal, and understand our lines (``eval '...'``, ``$?``). fish and csh do not: they run
until the timeout, like any program waiting for input."""
_OPTIONS_WITH_VALUE = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
SHELL_SETUP = ("PS1= PS2= PS4='+ '; unset PROMPT_COMMAND PS0 HISTFILE 2>/dev/null; "
               '[ -z "$BASH_VERSION" ] || set +H +o history')
"""What a nested shell is told first: no prompts (they would open every output), and for bash
no history expansion (``!``) or history. Its line editing stays on: readline echoes nothing on
our terminal (echo is off), and our lines for bash are printable ASCII only. (Turning editing
off in the middle of a line loses the rest of that line.)"""
EXITED_NOTE = "\n[the shell exited; a new shell was started: cwd, variables and jobs were reset]\n"
"""Shown when the agent ends its outermost shell (``exit``): it gets a fresh one."""
NESTED_KILLED_NOTE = "\n[the command did not stop; the shell it ran in was ended: back in the shell that started it]\n"
RESTARTED_NOTE = "\n[the command did not stop; a new shell was started: cwd, variables and jobs were reset]\n"


def runaway_note(killed: int, budget: int) -> str:
    """What the agent reads after :func:`is_flood` and the killing of what its command left."""
    return (f"\n[{killed} processes this command left running were killed as a fork bomb: more than {budget} "
            "still forking, or the process limit reached]\n")


class Level:
    """One shell reading the agent's terminal: a shell the agent started (``su - jack``, ``bash``,
    ``sh``), or the outer bash where it reads its commands from the terminal too (docker)."""

    def __init__(self, pid: int, name: str) -> None:
        self.pid, self.name = pid, name
        """Its pid (with job control, also its process group) and program name."""
        self.waiting: str | None = None
        """The nonce of this shell's line that started the shell above it (still running)."""
        self.status = 0
        """The exit status of its last command: the sentinel's printf resets ``$?``, so the next
        line sets it back first (``false`` then ``echo $?`` prints 1, ``exit`` returns it)."""

    def line(self, command: str, nonce: str) -> str:
        """``command`` as one input line that runs it in this shell and then prints the sentinel."""
        restore = f"(exit {self.status}); " if self.status else ""  # a subshell only after a failure
        if self.name in ("bash", "rbash"):
            return f"{restore}eval {quote(command)}; builtin printf '{sentinel_printf(nonce)}' $?\n"
        # Not bash: no $'...' quoting (dash lacks it). A quoted newline keeps the line going.
        posix = "'" + command.replace("'", "'\\''") + "'"
        return f"{restore}eval {posix}; command printf '{sentinel_printf(nonce)}' \"$?\"\n"


def waiting_nonces(levels: Sequence[Level]) -> list[str]:
    """The nonces of the lines still running below the top shell of ``levels`` (bottom first):
    their sentinel means the shells above them have exited."""
    return [level.waiting for level in levels[:-1] if level.waiting is not None]


def settle(levels: list[Level], found_nonce: str | None, status: int | None) -> None:
    """After a sentinel: when it was a lower shell's line, the shells above it have exited (they
    are dropped); the top shell then remembers ``status`` for ``$?``."""
    for index, level in enumerate(levels):
        if found_nonce is not None and level.waiting == found_nonce:
            del levels[index + 1:]
            level.waiting = None
            break
    if levels:
        levels[-1].status = status if status is not None and 0 <= status < 256 else 0


def flush_terminal_input(path: str) -> None:
    """Drop what was written to the terminal at ``path`` that no process has read (lines for a
    killed shell)."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError:
        return
    try:
        termios.tcflush(fd, termios.TCIFLUSH)
    except termios.error:
        pass
    finally:
        os.close(fd)


def _proc_text(pid: int, name: str) -> bytes:
    try:
        with open(f"/proc/{pid}/{name}", "rb") as f:
            return f.read()
    except OSError:
        return b""


def proc_stat(pid: int) -> list[bytes]:
    """The fields of /proc/<pid>/stat after the command name (state first); empty if gone."""
    data = _proc_text(pid, "stat")
    return data[data.rfind(b")") + 2:].split() if data else []


def interactive_shell(pid: int) -> str | None:
    """The name of the shell ``pid`` runs if it is an interactive one idle at the terminal.

    Interactive: a known shell program without ``-c`` and without a script operand.
    Idle: asleep, with no child in its own process group (a command substitution of its
    start-up files would be one). Returns None otherwise.
    """
    argv = [arg.decode("utf-8", "replace") for arg in _proc_text(pid, "cmdline").split(b"\0")[:-1]]
    if not argv:
        return None
    name = argv[0].rsplit("/", 1)[-1].lstrip("-")
    if name not in SHELL_NAMES:
        return None
    skip = False
    for arg in argv[1:]:
        if skip:
            skip = False
        elif arg in _OPTIONS_WITH_VALUE:
            skip = True
        elif arg.startswith("--"):
            if arg == "--":
                return None if arg != argv[-1] else name
        elif arg[:1] in ("-", "+") and len(arg) > 1:
            if "c" in arg[1:] and arg[0] == "-":
                return None
        else:
            return None  # a script operand
    fields = proc_stat(pid)
    if not fields or fields[0] != b"S":
        return None
    group = fields[2]
    for task in os.listdir(f"/proc/{pid}/task") if os.path.isdir(f"/proc/{pid}/task") else ():
        for child in _proc_text(pid, f"task/{task}/children").split():
            kid = proc_stat(int(child))
            if kid and kid[2] == group:
                return None
    return name


def read_counter(paths: Iterable[str | os.PathLike[str]], key: str) -> int:
    """The ``<key> <count>`` line of the first readable cgroup file of ``paths``
    (``memory.events``' ``oom_kill``, ``pids.events``' ``max``, ``cpu.stat``'s ``nr_throttled``);
    -1: none readable, or no such line."""
    want = key.encode()
    for path in paths:
        try:  # read at every command of every box: no text-mode file object
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                data = os.read(fd, 1 << 16)
            finally:
                os.close(fd)
        except OSError:
            continue
        for line in data.splitlines():
            name, _, value = line.partition(b" ")
            if name == want and value.strip().isdigit():
                return int(value)
    return -1


def at_pids_limit(total: int, pids_limit: int) -> bool:
    """Whether ``total`` processes hold a box at its pids limit (90% of it: a fork bomb stands
    just below the limit, in bash's fork retries). Whoever started them, and whenever, the box
    can start nothing more: everything but our shells is then a flood to kill."""
    return total >= pids_limit * 9 // 10


def is_flood(count_new: Callable[[], int], before: int, budget: int, pids_limit: int,
             watch_s: float = RUNAWAY_WATCH_S, still_s: float = RUNAWAY_STILL_S,
             throttled: Callable[[], int] | None = None, refused: Callable[[], int] | None = None) -> bool:
    """Whether what the last command left running is a flood to kill (a fork bomb).

    ``count_new()`` counts the processes the command left (those not there before it);
    ``before`` is how many were there. What it left is watched while it grows: a fork bomb
    doubles every few ms, a server started with ``&`` stays put. A flood: more than
    ``budget`` new processes, or the pids limit reached (:func:`at_pids_limit`). Not one:
    none left, or no growth for ``still_s`` (longer than a CPU-limited box is held still: a
    CFS period is 100 ms, so a bomb under ``cpus=`` may stand still for most of one), or
    ``watch_s`` passed. ``throttled()``, the box's count of CPU periods it was throttled in:
    while more than a quarter of ``budget`` stand still and the count goes up, the box is held
    still, not done: the watch goes on, up to ``RUNAWAY_THROTTLED_WATCH_S``. ``refused()``, how
    many forks the box's pids limit refused since the command started: one refused while the
    command left something is a flood (a bomb touches the limit for a moment between two looks,
    then its copies sleep in bash's fork retries, standing still below the budget).
    """
    start = time.monotonic()
    deadline, longest = start + watch_s, start + max(watch_s, RUNAWAY_THROTTLED_WATCH_S)
    seen, grew_at = 0, start
    periods = throttled() if throttled is not None else 0
    while True:
        new = count_new()
        if not new:
            return False
        if new > budget or at_pids_limit(new + before, pids_limit) or (refused is not None and refused() > 0):
            return True
        now = time.monotonic()
        if new > seen:
            seen, grew_at = new, now
        elif throttled is not None and new > budget // 4 and now < longest and (held := throttled()) > periods:
            periods, grew_at = held, now
            deadline = max(deadline, min(longest, now + still_s))
        elif now - grew_at >= still_s or now > deadline:
            return False
        time.sleep(0.015)
