"""Which OS task scripts reach the network: package installs, downloads, remote clones.

The AgentBench loader marks an item ``needs_network`` when one of its scripts (init, start,
or the example, which is the item's gold solution) runs a command below. The detection is
conservative: a command counts only when it cannot work offline, so a task that runs
offline is never left out by mistake; code that reaches the network in other ways (a
Python ``urlopen``, a socket) is not detected and fails as it would without the mark.

Detected (``sudo``, ``nice``, ``timeout`` and the like before the command, and options with
their values before the subcommand, allowed; ``#`` comments ignored):

- ``apt-get``, ``apt``, ``aptitude`` ``install``/``update``/``upgrade``/``dist-upgrade``/
  ``full-upgrade``/``download``/``source``/``build-dep``; ``apk add``/``update``;
  ``yum``/``dnf``/``zypper`` ``install``;
- ``pip``/``pip3``/``python -m pip`` ``install`` (not with ``--no-index``, nor of local
  paths or wheel files only);
- ``npm install``/``i``/``ci``/``add``, ``yarn add``/``install``, ``gem install``,
  ``cargo install``, ``go get``/``go install``;
- ``curl`` or ``wget`` of an ``http``, ``https`` or ``ftp`` URL whose host is not loopback
  (``localhost``, ``127.x``, ``::1``, ``0.0.0.0``);
- ``git clone``/``fetch``/``pull`` of a remote (``http(s)://``, ``git://``, ``ssh://``,
  ``user@host:``).

Example::

    >>> network_commands("apt update && apt install sudo -y")
    ['apt update', 'apt install']
    >>> network_commands("curl -s http://127.0.0.1:8080/ | wc -c")
    []
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

_LOOPBACK_HOSTS = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[?::1\]?|0\.0\.0\.0|\[?::\]?)$", re.IGNORECASE)

_PACKAGE_MANAGERS: dict[str, frozenset[str]] = {
    "apt-get": frozenset({"install", "update", "upgrade", "dist-upgrade", "full-upgrade", "download", "source",
                          "build-dep"}),
    "apt": frozenset({"install", "update", "upgrade", "dist-upgrade", "full-upgrade", "download", "source",
                      "build-dep"}),
    "aptitude": frozenset({"install", "update", "upgrade", "safe-upgrade", "full-upgrade", "download"}),
    "apk": frozenset({"add", "update", "upgrade", "fetch"}),
    "yum": frozenset({"install", "update", "upgrade"}),
    "dnf": frozenset({"install", "update", "upgrade"}),
    "zypper": frozenset({"install", "in", "update", "up"}),
    "npm": frozenset({"install", "i", "ci", "add"}),
    "yarn": frozenset({"add", "install"}),
    "gem": frozenset({"install"}),
    "cargo": frozenset({"install"}),
    "go": frozenset({"get", "install"}),
}

_PREFIX_VALUES: dict[str, frozenset[str]] = {
    "sudo": frozenset({"-u", "-g", "-U", "-C", "-h", "-p"}), "nice": frozenset({"-n"}),
    "timeout": frozenset({"-s", "-k"}), "ionice": frozenset({"-c", "-n", "-p"}),
    "stdbuf": frozenset({"-i", "-o", "-e"}),
}
"""Prefix options that take the next word as their value."""

_VALUED_PREFIXES = frozenset({"timeout"})
"""Prefixes whose first operand is theirs, not the command (``timeout 60 apt-get install``)."""

_VALUED_OPTIONS = frozenset({"-o", "-t", "-c", "--option", "--target-release", "--config-file", "--default-release"})
"""Package-manager options that take the next word as their value (``apt-get -o X=Y install``)."""

_PREFIXES = frozenset({"sudo", "env", "nohup", "time", "exec", "command", "builtin", "then", "do", "else", "!",
                       "nice", "ionice", "stdbuf", "timeout",
                       "{", "(", "xargs"})
"""Words that may stand before the command itself (``sudo apt install``, ``then apt install``)."""

_SEPARATORS = re.compile(r"&&|\|\||[;|&\n()`]|\$\(")
_URL = re.compile(r"(?:https?|ftp)://(\[[^\]]+\]|[^/\s:'\"?#]+)", re.IGNORECASE)
_REMOTE_GIT = re.compile(r"^((?:https?|git|ssh)://|[\w.-]+@[\w.-]+:)", re.IGNORECASE)


def _strip_comments(code: str) -> str:
    """``code`` without ``#`` comments: whole comment lines and `` # ...`` tails outside quotes
    (a shebang is a comment too)."""
    out = []
    for line in code.splitlines():
        quote: str | None = None
        cut = len(line)
        for i, ch in enumerate(line):
            if quote is not None:
                if ch == quote:
                    quote = None
            elif ch in ("'", '"'):
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1] in " \t;&|("):
                cut = i
                break
        out.append(line[:cut])
    return "\n".join(out)


def _words(segment: str) -> list[str]:
    try:
        return shlex.split(segment, posix=True)
    except ValueError:  # an unbalanced quote: fall back to whitespace
        return segment.split()


def _command(words: list[str]) -> list[str]:
    """The words from the command name on: prefixes (``sudo -u x``), variable assignments and
    redirections dropped."""
    i = 0
    while i < len(words):
        word = words[i]
        if word in _PREFIXES:
            i += 1
            # The prefix's options, and the values of those that take one (sudo -u USER).
            valued = _PREFIX_VALUES.get(word, frozenset())
            while i < len(words) and words[i].startswith("-"):
                i += 2 if words[i] in valued else 1
            if word in _VALUED_PREFIXES and i < len(words):
                i += 1  # timeout's duration
            continue
        if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", word):
            i += 1
            continue
        break
    return words[i:]


def _subcommand(args: list[str]) -> str | None:
    """The first argument that is neither an option nor an option's value (``apt-get -y -o
    Acquire::Retries=3 install`` -> ``install``)."""
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _VALUED_OPTIONS:
            skip = True
        elif not arg.startswith("-"):
            return arg
    return None


def _segment_commands(segment: str) -> list[str]:
    found: list[str] = []
    words = _command(_words(segment))
    if not words:
        return found
    name = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if name in ("python", "python3") and args[:2] == ["-m", "pip"]:
        name, args = "pip", args[2:]
    if name in _PACKAGE_MANAGERS:
        sub = _subcommand(args)
        if sub in _PACKAGE_MANAGERS[name]:
            found.append(f"{name} {sub}")
    elif name in ("pip", "pip3") and _subcommand(args) == "install" and "--no-index" not in args:
        operands = [a for a in args if not a.startswith("-") and a != "install"]
        local = bool(operands) and all(a.startswith((".", "/", "~")) or a.endswith((".whl", ".tar.gz", ".zip"))
                                       for a in operands)
        if not local:
            found.append(f"{name} install")
    elif name in ("curl", "wget"):
        for arg in args:
            match = _URL.match(arg.strip("'\""))
            if match and not _LOOPBACK_HOSTS.match(match.group(1)):
                found.append(f"{name} {match.group(0)}")
                break
    elif name == "git":
        sub = _subcommand(args)
        if sub in ("clone", "fetch", "pull"):
            rest = args[args.index(sub) + 1:]
            if any(_REMOTE_GIT.match(a) for a in rest):
                found.append(f"git {sub}")
    return found


def command_segments(code: str, language: str = "bash") -> Iterator[str]:
    """Each piece of a script that reads as one command, comments left out.

    Each line of a bash script is split at ``&&``, ``||``, ``;``, ``|``, ``&`` and subshell
    brackets, and each piece is read as one command; so is the quoted argument of ``-c``
    (``bash -c '...'``, ``python3 -c "..."``). In Python code, every string literal on one line
    is read as a command line (``subprocess.run("pip install x", shell=True)``).
    """
    text = _strip_comments(code)
    if language == "python":
        pieces = re.findall(r"'([^'\n]*)'", text) + re.findall(r'"([^"\n]*)"', text)
    else:
        pieces = [text, *re.findall(r"-c\s+'([^']*)'", text), *re.findall(r'-c\s+"([^"]*)"', text)]
    for piece in pieces:
        yield from (segment for segment in _SEPARATORS.split(piece) if segment.strip())


def shell_words(segment: str) -> list[str]:
    """A command's words, quotes removed (whitespace-split when a quote is unbalanced)."""
    return _words(segment)


def network_commands(code: str, language: str = "bash") -> list[str]:
    """The commands of a script that need the network, in order, as short labels
    (``"apt install"``, ``"curl https://example.org"``); empty when none is detected. The
    script is read as :func:`command_segments` says."""
    found: list[str] = []
    for segment in command_segments(code, language):
        found.extend(c for c in _segment_commands(segment) if c not in found)
    return found


__all__ = ["command_segments", "network_commands", "shell_words"]
