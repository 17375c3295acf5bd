"""Generated OS tasks: the families of ``templates.yaml`` filled with drawn values.

Each family (``gen-os/<name>``: files, permissions, text processing, archives, processes,
users) is an OS task with ``<<name>>`` holes in its scripts, instruction, evaluation and
reference solution. A drawer per family picks the values (folder and file names, counts,
sizes, modes, file contents) and computes the answers from them, so every task carries a
reference solution whose oracle replay scores 1 (the tests replay a sample on the local
sandbox). The scripts stay in the YAML file; this module only fills holes.

Example:

    >>> from agentunit_gym.domains.os.generate import generate
    >>> tasks = generate(500, seed=7, split="train")
    >>> len(tasks), len({t.id for t in tasks}), tasks[0].id.startswith("gen-os-" + tasks[0].template[7:] + "-")
    (500, 500, True)
    >>> tasks[0].id == generate(500, seed=7, split="train")[0].id  # seeded: the same set again
    True
"""

from __future__ import annotations

import datetime
import functools
import hashlib
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.overlap import content_id
from agentunit_gym.tasks.splits import split_of_family

TEMPLATE_FILE = Path(__file__).with_name("templates.yaml")
_HOLE = re.compile(r"<<(\w+)>>")

WORDS = ("amber", "basil", "cedar", "delta", "ember", "fable", "garnet", "harbor", "indigo", "juniper", "kestrel",
         "lagoon", "meadow", "nectar", "orchid", "pebble", "quartz", "raven", "saffron", "thistle", "umber", "velvet",
         "willow", "yarrow", "zephyr", "acorn", "birch", "cobalt", "dune", "fjord", "glacier", "hazel", "iris",
         "jasper", "kelp", "lichen", "maple", "nimbus", "opal", "prairie", "quill", "ridge", "sorrel", "tundra")
"""Our own word list for names and file contents."""
TARGETS = ("alert", "backup", "cancel", "deploy", "export", "failover", "gateway", "hotfix", "import", "journal",
           "kernel", "latency", "migrate", "network", "offline", "payload", "quota", "restart", "schema", "timeout")
"""Words that tasks ask about; none is part of a word in :data:`WORDS`."""
EXTENSIONS = ("log", "txt", "csv", "json", "conf", "md", "dat", "bak", "ini", "xml")
METRICS = ("price", "weight", "count", "score", "length", "volume")


def _name(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}_{rng.randint(1, 999)}"


def _lines(rng: random.Random, n: int, words: int = 4) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


def _files_count_ext(rng: random.Random) -> dict[str, Any]:
    ext, other = rng.sample(EXTENSIONS, 2)
    return {"dir": _name(rng), "ext": ext, "other": other, "n": rng.randint(1, 60), "m": rng.randint(0, 40)}


def _sizes(rng: random.Random, directory: str) -> tuple[list[str], list[int], str]:
    names = [f"{w}.{rng.choice(EXTENSIONS)}" for w in rng.sample(WORDS, rng.randint(3, 8))]
    sizes = rng.sample(range(100, 90_000), len(names))
    writes = "\n".join(f"head -c {s} /dev/zero > /root/{directory}/{n}" for n, s in zip(names, sizes, strict=True))
    return names, sizes, writes


def _files_largest(rng: random.Random) -> dict[str, Any]:
    directory = _name(rng)
    names, sizes, writes = _sizes(rng, directory)
    return {"dir": directory, "writes": writes, "largest": names[sizes.index(max(sizes))]}


def _files_total_size(rng: random.Random) -> dict[str, Any]:
    directory = _name(rng)
    _, sizes, writes = _sizes(rng, directory)
    return {"dir": directory, "writes": writes, "total": sum(sizes), "nested": rng.randint(100, 9000)}


def _files_empty_count(rng: random.Random) -> dict[str, Any]:
    return {"dir": _name(rng), "n": rng.randint(1, 40), "m": rng.randint(0, 30)}


def _files_newest(rng: random.Random) -> dict[str, Any]:
    directory = _name(rng)
    names = [f"{w}.{rng.choice(EXTENSIONS)}" for w in rng.sample(WORDS, rng.randint(3, 8))]
    # Distinct whole days between 2010 and 2025, so no two files share a time.
    days = rng.sample(range(0, 365 * 15), len(names))
    stamps = [(datetime.date(2010, 1, 1) + datetime.timedelta(days=d)).isoformat() for d in days]
    writes = "\n".join(f'echo x > /root/{directory}/{n} && touch -d "{t} 12:00:00" /root/{directory}/{n}'
                        for n, t in zip(names, stamps, strict=True))
    return {"dir": directory, "writes": writes, "newest": names[days.index(max(days))]}


def _perm_chmod(rng: random.Random) -> dict[str, Any]:
    mode = f"{rng.randint(4, 7)}{rng.randint(0, 7)}{rng.randint(0, 7)}"
    start = "644" if mode != "644" else "600"
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.{rng.choice(EXTENSIONS)}", "mode": mode, "start": start}


def _perm_count_exec(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(2, 40)
    return {"dir": _name(rng), "n": n, "k": rng.randint(1, n - 1)}


def _text_count_word(rng: random.Random) -> dict[str, Any]:
    word = rng.choice(TARGETS)
    lines = _lines(rng, rng.randint(5, 60))
    count = rng.randint(1, len(lines))
    for i in rng.sample(range(len(lines)), count):
        parts = lines[i].split()
        parts.insert(rng.randint(0, len(parts)), word)
        lines[i] = " ".join(parts)
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.txt", "word": word, "content": "\n".join(lines),
            "count": count}


def _text_nth_line(rng: random.Random) -> dict[str, Any]:
    lines = _lines(rng, rng.randint(3, 60))
    line = rng.randint(1, len(lines))
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.txt", "content": "\n".join(lines), "line": line,
            "text": lines[line - 1]}


def _text_sum_column(rng: random.Random) -> dict[str, Any]:
    first, second = rng.sample(METRICS, 2)
    rows = [(rng.choice(WORDS), rng.randint(0, 999), rng.randint(0, 999)) for _ in range(rng.randint(2, 50))]
    index = rng.choice((2, 3))
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.csv", "first": first, "second": second,
            "column": first if index == 2 else second, "index": index,
            "content": "\n".join(f"{n},{a},{b}" for n, a, b in rows),
            "total": sum(r[index - 1] for r in rows)}


def _text_unique_count(rng: random.Random) -> dict[str, Any]:
    distinct = _lines(rng, rng.randint(2, 20), words=2)
    lines = distinct + [rng.choice(distinct) for _ in range(rng.randint(1, 40))]
    rng.shuffle(lines)
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.txt", "content": "\n".join(lines),
            "count": len(set(lines))}


def _text_first_sorted(rng: random.Random) -> dict[str, Any]:
    # Lowercase letters only, so every locale's sort order is the plain one min() gives.
    lines = list({rng.choice(WORDS) + rng.choice(WORDS) for _ in range(rng.randint(3, 40))})
    rng.shuffle(lines)
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.txt", "content": "\n".join(lines), "first": min(lines)}


def _text_replace(rng: random.Random) -> dict[str, Any]:
    old, new = rng.sample(TARGETS, 2)
    lines = _lines(rng, rng.randint(3, 40))
    for i in rng.sample(range(len(lines)), rng.randint(1, len(lines))):
        lines[i] = f"{lines[i]} {old}"
    content = "\n".join(lines)
    expected = content.replace(old, new) + "\n"
    return {"dir": _name(rng), "file": f"{rng.choice(WORDS)}.txt", "old": old, "new": new, "content": content,
            "md5": hashlib.md5(expected.encode()).hexdigest()}


def _archive_count(rng: random.Random) -> dict[str, Any]:
    return {"dir": _name(rng), "name": _name(rng), "n": rng.randint(1, 80)}


def _archive_extract(rng: random.Random) -> dict[str, Any]:
    directory, name, dest = _name(rng), _name(rng), _name(rng)
    if len({directory, name, dest}) < 3:
        dest = dest + "_out"
    return {"dir": directory, "name": name, "dest": dest, "n": rng.randint(1, 40), "word": rng.choice(WORDS)}


def _archive_create(rng: random.Random) -> dict[str, Any]:
    return {"dir": _name(rng), "name": _name(rng), "n": rng.randint(1, 40), "word": rng.choice(WORDS)}


def _perm_world_writable(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(2, 40)
    return {"dir": _name(rng), "n": n, "k": rng.randint(1, n - 1)}


def _program(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}d{rng.randint(1, 99)}"


def _proc_count(rng: random.Random) -> dict[str, Any]:
    prog, decoy = _program(rng), _program(rng)
    if decoy == prog:
        decoy += "x"
    k, m = rng.randint(1, 6), rng.randint(0, 3)
    return {"prog": prog, "decoy": decoy, "k": k, "m": m, "total": k + m}


def _proc_kill(rng: random.Random) -> dict[str, Any]:
    prog, keeper = _program(rng), _program(rng)
    if keeper == prog:
        keeper += "x"
    k = rng.randint(1, 5)
    return {"prog": prog, "keeper": keeper, "k": k, "total": k + 1}


def _user(rng: random.Random) -> str:
    return f"{rng.choice(WORDS)}{rng.randint(10, 999)}"


def _users_owner_count(rng: random.Random) -> dict[str, Any]:
    n = rng.randint(2, 30)
    return {"user": _user(rng), "dir": _name(rng), "n": n, "k": rng.randint(1, n - 1)}


def _users_chown(rng: random.Random) -> dict[str, Any]:
    return {"user": _user(rng), "dir": _name(rng), "file": f"{rng.choice(WORDS)}.{rng.choice(EXTENSIONS)}"}


DRAWERS: dict[str, Callable[[random.Random], dict[str, Any]]] = {
    "gen-os/files-count-ext": _files_count_ext,
    "gen-os/files-largest": _files_largest,
    "gen-os/files-total-size": _files_total_size,
    "gen-os/perm-chmod": _perm_chmod,
    "gen-os/perm-count-exec": _perm_count_exec,
    "gen-os/text-count-word": _text_count_word,
    "gen-os/text-nth-line": _text_nth_line,
    "gen-os/text-sum-column": _text_sum_column,
    "gen-os/text-replace": _text_replace,
    "gen-os/archive-count": _archive_count,
    "gen-os/archive-extract": _archive_extract,
    "gen-os/proc-count": _proc_count,
    "gen-os/proc-kill": _proc_kill,
    "gen-os/users-owner-count": _users_owner_count,
    "gen-os/users-chown": _users_chown,
    "gen-os/files-empty-count": _files_empty_count,
    "gen-os/files-newest": _files_newest,
    "gen-os/text-unique-count": _text_unique_count,
    "gen-os/text-first-sorted": _text_first_sorted,
    "gen-os/archive-create": _archive_create,
    "gen-os/perm-world-writable": _perm_world_writable,
}
"""Per family, the function that draws its values (and computes its answers)."""


@functools.cache
def _templates() -> dict[str, dict[str, Any]]:
    items = yaml.safe_load(TEMPLATE_FILE.read_text(encoding="utf-8"))
    out = {item.pop("family"): item for item in items}
    if set(out) != set(DRAWERS):
        raise ConfigError(f"{TEMPLATE_FILE} has families {sorted(out)}, the drawers {sorted(DRAWERS)}: expected the "
                          "same; add the missing template or drawer.")
    return out


def templates() -> tuple[str, ...]:
    """Every family the OS generator makes."""
    return tuple(sorted(DRAWERS))


def _fill(value: Any, values: dict[str, Any]) -> Any:
    if isinstance(value, str):
        return _HOLE.sub(lambda m: str(values[m.group(1)]), value)
    if isinstance(value, list):
        return [_fill(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, values) for k, v in value.items()}
    return value


def make_task(family: str, values: dict[str, Any], task_id: str) -> OSTask:
    """The task of ``family`` with its holes filled from ``values``.

    Raises:
        ConfigError: an unknown family. KeyError: a hole ``values`` does not fill.
    """
    template = _templates().get(family)
    if template is None:
        raise ConfigError(f"no OS template {family!r}; the families are {', '.join(templates())}.")
    data = _fill(template, values)
    return OSTask.model_validate({**data, "id": task_id, "template": family, "split": split_of_family(family),
                                  "optimal_steps": len(data["reference_solution"])})


def generate(count: int, *, seed: int = 0, split: str | None = None) -> list[OSTask]:
    """``count`` distinct tasks, families drawn uniformly (of ``split``'s families only), values drawn with ``seed``.

    A task's id names its family and drawn values (``gen-os-<family>-<hash>``, see
    :func:`~agentunit_gym.tasks.overlap.content_id`): the same in every seed and set.

    Raises:
        ConfigError: ``split`` leaves no family.
    """
    families = [f for f in templates() if split is None or split_of_family(f) == split]
    if not families:
        raise ConfigError(f"no OS family is in split {split!r}; generate without a split, or with another one.")
    rng = random.Random(f"gen-os:{seed}:{split}")
    seen: set[str] = set()
    tasks: list[OSTask] = []
    while len(tasks) < count:
        family = rng.choice(families)
        values = DRAWERS[family](rng)
        task_id = content_id("os", family, sorted(values.items()))
        if task_id in seen:
            continue
        seen.add(task_id)
        tasks.append(make_task(family, values, task_id))
    return tasks
