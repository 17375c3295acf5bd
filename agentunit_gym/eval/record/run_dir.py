"""The run folder: a new unique one, the latest one, its lock, its stored configuration.

A run writes into one folder (``results/<UTC time>-<agent>`` unless told otherwise); two evals
never write one folder at once (a ``flock`` on ``.lock``), and a run refused before its first
episode leaves no folder behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path

from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.plan.config import EvalConfig

DEFAULT_RESULTS = Path("results")

_MADE_HERE: set[Path] = set()
"""Run folders :func:`default_run_dir` made in this process (removed again if a run is refused)."""

LOCK_FILE = ".lock"
"""Held (``flock``) by the eval writing a run folder; a second eval on the folder is refused."""


def default_run_dir(config: EvalConfig, root: Path = DEFAULT_RESULTS) -> Path:
    """A new folder ``results/<UTC time>-<agent>``, created here: sortable, says what ran, and
    unique (a second eval started in the same second gets ``-2``, ``-3`` ...; the folder is
    made with an exclusive ``mkdir``, so two processes never share one)."""
    agent = re.sub(r"[^A-Za-z0-9_.-]+", "_", config.agent)[:40]
    stem = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{agent}"
    root.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 1000):
        candidate = root / (stem if attempt == 1 else f"{stem}-{attempt}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        _MADE_HERE.add(candidate)
        return candidate
    raise ConfigError(f"could not make a new run folder under {root} (1000 runs named {stem}).")


def latest_run_dir(root: Path = DEFAULT_RESULTS) -> Path:
    """The most recently started run under ``root`` (for ``--resume`` without ``--output``).

    Raises:
        ConfigError: no run there.
    """
    runs = [p for p in root.glob("*") if (p / "config.json").exists()] if root.exists() else []
    if not runs:
        raise ConfigError(f"--resume without --output needs a run under {root}/, and there is none.")
    return max(runs, key=lambda p: ((p / "config.json").stat().st_mtime, p.name))


def stored_config(run_dir: str | Path) -> EvalConfig | None:
    """The configuration stored in ``run_dir/config.json``; None when there is none.

    Raises:
        ConfigError: a config.json that does not read.
    """
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return None
    try:
        return EvalConfig.model_validate(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path} does not read as a run's configuration: {exc}") from exc


def prepare_run_dir(config: EvalConfig, output: str | Path | None, *, resume: bool = False) -> Path:
    """The run folder: ``output`` (the latest run with ``resume``), else a new unique one.

    Raises:
        ConfigError: ``output`` is a file, or ``resume`` finds no run.
    """
    if output is None:
        return latest_run_dir() if resume else default_run_dir(config)
    path = Path(output)
    if path.exists() and not path.is_dir():
        raise ConfigError(f"output {path} is a file; give a folder for the run (it is created if missing).")
    return path


@contextlib.contextmanager
def lock_run_dir(run_dir: Path) -> Iterator[None]:
    """Hold the run folder's lock for the duration, so two evals never write one folder.

    Raises:
        ConfigError: another process holds it.
    """
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = open(run_dir / LOCK_FILE, "a+", encoding="utf-8")  # noqa: SIM115 - held open for the lock's duration
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise ConfigError(f"{run_dir} is in use by another eval (pid {holder}); wait for it, or give "
                              "another --output.") from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield
    finally:
        handle.close()  # closing releases the lock


_OUR_FILES = ("config.json", "episodes.jsonl", "left_out.json", LOCK_FILE)


def remove_if_unused(run_dir: Path) -> None:
    """Remove what this call made in ``run_dir`` when no episode was written (a run refused at
    the start leaves no empty results folder); anything else there stays."""
    episodes = run_dir / "episodes.jsonl"
    if episodes.exists() and episodes.stat().st_size > 0:
        return
    for name in _OUR_FILES:
        with contextlib.suppress(OSError):
            (run_dir / name).unlink()
    for folder in (run_dir / "traces", run_dir):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only when empty


def made_here(run_dir: Path) -> bool:
    """Whether :func:`default_run_dir` made ``run_dir`` in this process."""
    return run_dir in _MADE_HERE


__all__ = ["DEFAULT_RESULTS", "LOCK_FILE", "default_run_dir", "latest_run_dir", "lock_run_dir", "made_here",
           "prepare_run_dir", "remove_if_unused", "stored_config"]
