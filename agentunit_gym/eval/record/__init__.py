"""Record: what a run leaves on disk, and what is read back from it.

- :mod:`~agentunit_gym.eval.record.run_dir`: the run folder (a new unique one, the latest one,
  its lock, its stored configuration).
- :mod:`~agentunit_gym.eval.record.records`: ``episodes.jsonl`` (one line per finished episode,
  flushed, so a run resumes), the traces, and reading them back.
- :mod:`~agentunit_gym.eval.record.export` and :mod:`~agentunit_gym.eval.record.trainer_columns`:
  a run's episodes as chat trajectories for trainers (``agentunit-gym export``).

Imports only the plan and agents stages below it.
"""
