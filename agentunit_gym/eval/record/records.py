"""A run's files: ``episodes.jsonl`` (one record per finished episode), ``traces/``, ``config.json``,
and what a resume reads back.

Every finished episode is written as it finishes (its trace, then its line, flushed; in a
local run the evaluator writes the episodes that ran to their end on a thread of its own,
and the env copy that ran one starts its next once they are flushed; errors are written
from its loop, and with ``--ray`` the driver writes what its nodes return), so an
interrupted run resumes where it stopped; a torn last line is skipped on reading.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from agentunit_gym.core.trace import EpisodeTrace
from agentunit_gym.errors import ConfigError
from agentunit_gym.eval.plan.config import EvalConfig

NOT_MEASURED = frozenset({"infra_error", "endpoint_error"})
"""Record statuses whose episodes the metrics (and the judge) leave out: the failure was not the agent's."""


class EpisodeRecord(BaseModel):
    """One line of ``episodes.jsonl``."""

    model_config = ConfigDict(frozen=True)

    key: str
    env_id: str
    task_id: str
    run: int
    seed: int
    agent: str
    status: Literal["done", "agent_error", "endpoint_error", "infra_error", "task_error"]
    """``done``: the episode ended in the env (also when the agent's model ran out of
    context: finish reason ``context_limit``); ``agent_error``: the agent raised (counted as
    a failure, never retried); ``endpoint_error``: the agent's model endpoint stayed
    unavailable through a turn's retries (connection refused, timeouts, 5xx): not the agent's
    failure, so left out of the metrics (success_rate included) like AgentBench's task
    errors, counted in the summary's ``status``, and rerun by ``--resume``; ``infra_error``:
    retries spent (re-run by ``--resume``);
    ``task_error``: the task itself failed on this backend (its reference solution does not
    run there), recorded with the reason and never retried."""
    attempts: int = 1
    success: bool = False
    reward: float = 0.0
    finish_reason: str | None = None
    steps: int = 0
    wall_s: float = 0.0
    trace: str | None = None
    """The trace file, relative to the run directory."""
    error: str = ""
    node: str = ""
    """The Ray node that ran the episode (``--ray`` runs: the node id); empty for a local run."""
    split: str = ""
    """The task's split as the episode's reset gave it (``info["split"]``: ``train``, ``test``,
    ``dev``); ``""`` for a task without one, or an episode that never reset (no trace)."""
    backend: str = ""
    """The backend the episode ran on (``info["backend"]``): what ``--backend auto`` chose on the
    host that ran it; ``""`` for an episode that never reset (no trace)."""


@dataclass
class RunPaths:
    """Where a run's files go."""

    root: Path

    @property
    def episodes(self) -> Path:
        return self.root / "episodes.jsonl"

    @property
    def traces(self) -> Path:
        return self.root / "traces"

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def left_out(self) -> Path:
        """The tasks the run's envs could not run here, with the reason (a JSON list)."""
        return self.root / "left_out.json"


def read_records(path: Path) -> list[EpisodeRecord]:
    """The records of ``episodes.jsonl``, the last one per key; a torn last line (the run was
    killed while writing it) is skipped."""
    if not path.exists():
        return []
    latest: dict[str, EpisodeRecord] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            record = EpisodeRecord.model_validate_json(line)
        except ValueError:
            continue
        latest[record.key] = record
    return list(latest.values())


def load_trace(run_dir: Path, record: EpisodeRecord) -> EpisodeTrace | None:
    if record.trace is None:
        return None
    path = run_dir / record.trace
    if not path.exists():
        return None
    return EpisodeTrace.model_validate_json(path.read_text(encoding="utf-8"))


def iter_records(run_dir: Path) -> Iterator[tuple[EpisodeRecord, EpisodeTrace | None]]:
    """Every record of a run with its trace (None if missing)."""
    for record in read_records(RunPaths(run_dir).episodes):
        yield record, load_trace(run_dir, record)


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def trace_filename(key: str) -> str:
    return _UNSAFE.sub("_", key.replace("AgentUnit/", "")) + ".json"


def _ends_with_newline(path: Path) -> bool:
    with path.open("rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) == b"\n"


class RecordWriter:
    """Appends records and traces; every record is flushed to the OS before its env copy's
    next episode (on the evaluator's records thread the other copies' episodes go on while
    it is written).

    Flushed, not fsynced: a killed process loses nothing that was flushed (the kernel holds
    it), while an fsync per episode was measured at ~4 ms here (it commits the new trace
    file's metadata too), more than a whole SQLite episode. After a power loss the last
    lines may be missing; ``--resume`` then runs those episodes again.
    """

    def __init__(self, paths: RunPaths) -> None:
        self.paths = paths
        paths.traces.mkdir(parents=True, exist_ok=True)
        torn = paths.episodes.exists() and paths.episodes.stat().st_size > 0 and not _ends_with_newline(paths.episodes)
        self._file = paths.episodes.open("a", encoding="utf-8")
        # The evaluator writes finished episodes on a thread of its own and errors on its loop:
        # one write at a time, so no two lines interleave.
        self._lock = threading.Lock()
        if torn:
            # A killed run can leave half a line: end it, so the next record starts on its own line.
            self._file.write("\n")

    def write(self, record: EpisodeRecord, trace: EpisodeTrace | None) -> EpisodeRecord:
        """Write ``trace`` (when given) and ``record``, flushed; returns the record as written
        (with its trace's path). Safe to call from several threads."""
        if trace is not None:
            name = trace_filename(record.key)
            tmp = self.paths.traces / (name + ".tmp")
            tmp.write_text(trace.model_dump_json(), encoding="utf-8")
            os.replace(tmp, self.paths.traces / name)  # a killed run never leaves half a trace
            record = record.model_copy(update={"trace": f"traces/{name}"})
        line = record.model_dump_json() + "\n"
        with self._lock:
            self._file.write(line)
            self._file.flush()
        return record

    def close(self) -> None:
        self._file.close()


def check_run_dir(paths: RunPaths, config: EvalConfig, resume: bool) -> None:
    """Refuse a directory holding another run, then write ``config.json``.

    Raises:
        ConfigError: episodes there without ``resume``, or a resume with other settings.
    """
    if paths.config.exists():
        stored = json.loads(paths.config.read_text(encoding="utf-8"))
        if not resume and paths.episodes.exists() and paths.episodes.stat().st_size > 0:
            raise ConfigError(f"{paths.root} already holds a run: pass --resume to continue it, or another --output.")
        stored_key = EvalConfig.model_validate(stored).resume_key()
        if resume and stored_key != config.resume_key():
            diff = sorted(k for k in stored_key if stored_key[k] != config.resume_key()[k])
            raise ConfigError(f"{paths.root} holds a run with other settings ({', '.join(diff)}): "
                              "resume it with the same options, or use another --output.")
    paths.config.write_text(config.model_dump_json(indent=2), encoding="utf-8")


__all__ = ["NOT_MEASURED", "EpisodeRecord", "RecordWriter", "RunPaths", "check_run_dir", "iter_records", "load_trace",
           "read_records", "trace_filename"]
