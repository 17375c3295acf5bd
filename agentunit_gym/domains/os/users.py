"""Which OS task scripts act as another user: only a sandbox that maps many users runs them.

The docker sandbox has real users; the local sandbox maps many users only when started by
root, else one uid (root inside): ``useradd`` works, but no process can become another user
and no file can be given to one (docs/sandbox-local.md). The AgentBench loader marks an item
``needs_users`` when one of its scripts (init, start, the example, which is the item's gold
solution, or a check) runs a command below, so a run whose sandbox maps one uid lists it as
left out (with the reason) instead of failing it, and a run whose sandbox maps many runs it.

Detected (``#`` comments ignored; each piece between ``&&``, ``||``, ``;``, ``|``, ``&`` and
subshell brackets read as one command, and the quoted argument of ``-c``):

- ``su``, ``runuser``, ``login``, ``newgrp``, ``sg``;
- ``sudo -u USER`` / ``--user=USER`` for a user other than root, ``sudo -i`` / ``-s`` / ``su``;
- ``chown`` / ``chgrp`` to an owner or group other than root (``chown root:root f`` runs).

Example::

    >>> user_commands("useradd -m jack && chown jack:jack /home/jack")
    ['chown jack:jack']
    >>> user_commands("chown -R root:root /srv")
    []
"""

from __future__ import annotations

import re

from agentunit_gym.domains.os.network import command_segments, shell_words

ONE_UID = "this sandbox maps one uid (the local sandbox maps many users only when started by root)"
"""Why a task that switches users is left out of a run whose sandbox cannot switch users."""
ONE_UID_HINT = "it maps one uid here (run as root, or use --backend docker)"
"""What to do about it, in the one-line note of a run that leaves such tasks out."""

_SWITCH = frozenset({"su", "runuser", "login", "newgrp", "sg"})
_ROOT = frozenset({"", "root", "0"})
_LEADING = frozenset({"nohup", "time", "exec", "command", "builtin", "then", "do", "else", "!", "{", "(", "env",
                      "xargs"})


def _owner_is_root(spec: str, *, group_only: bool) -> bool:
    """``chown`` ``OWNER[:GROUP]`` (or ``chgrp`` ``GROUP``) names only root, or ids 0."""
    if group_only:
        return spec in _ROOT
    owner, _, group = spec.replace(".", ":", 1).partition(":")
    return owner in _ROOT and group in _ROOT


def _segment(segment: str) -> str | None:
    words = shell_words(segment)
    i = 0
    while i < len(words) and (words[i] in _LEADING or re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[i])):
        i += 1
    words = words[i:]
    if not words:
        return None
    name, args = words[0].rsplit("/", 1)[-1], words[1:]
    if name in _SWITCH:
        return name
    if name == "sudo":
        return _sudo(args)
    if name in ("chown", "chgrp"):
        operands = [a for a in args if not a.startswith("-")]
        if operands and not _owner_is_root(operands[0], group_only=name == "chgrp"):
            return f"{name} {operands[0]}"
    return None


def _sudo(args: list[str]) -> str | None:
    """What ``sudo ARGS`` does as another user: ``-u USER`` (also ``-uUSER``, ``-iu USER``,
    ``--user=USER``) for a user other than root, a login or shell (``-i``, ``-s``), or what the
    command it runs as root does."""
    j = 0
    while j < len(args):
        arg = args[j]
        if arg.startswith("--"):
            if arg in ("--login", "--shell"):
                return f"sudo {arg}"
            if arg == "--user" or arg.startswith("--user="):
                user = arg.split("=", 1)[1] if "=" in arg else (args[j + 1] if j + 1 < len(args) else "")
                return None if user.lstrip("#") in _ROOT else f"sudo -u {user}"
            j += 1
            continue
        if not arg.startswith("-"):
            return _segment(" ".join(args[j:]))  # what sudo runs (as root)
        flags = arg[1:]
        if "u" in flags:
            rest = flags[flags.index("u") + 1:]
            user = rest or (args[j + 1] if j + 1 < len(args) else "")
            return None if user.lstrip("#") in _ROOT else f"sudo -u {user}"
        if "i" in flags or "s" in flags:
            return f"sudo -{'i' if 'i' in flags else 's'}"
        j += 1
    return None


def user_commands(code: str, language: str = "bash") -> list[str]:
    """The commands of a script that act as, or give files to, another user, in order, as
    short labels (``"su"``, ``"chown jack:jack"``); empty when none is detected. The script
    is read as the network detection reads it (:func:`~agentunit_gym.domains.os.network.command_segments`)."""
    found: list[str] = []
    for segment in command_segments(code, language):
        label = _segment(segment)
        if label is not None and label not in found:
            found.append(label)
    return found


__all__ = ["user_commands"]
