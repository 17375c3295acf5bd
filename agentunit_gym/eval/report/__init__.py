"""Report: what a finished run's records mean.

- :mod:`~agentunit_gym.eval.report.metrics`: the metrics catalog over episodes.
- :mod:`~agentunit_gym.eval.report.stats`: intervals and tests (the formulas).
- :mod:`~agentunit_gym.eval.report.summary`: ``summary.json`` (every metric with its interval).
- :mod:`~agentunit_gym.eval.report.judged`: the judged metrics beside the env's own.
- :mod:`~agentunit_gym.eval.report.compare` and ``comparison``: two runs, paired by task.
- :mod:`~agentunit_gym.eval.report.html`: ``report.html`` (:func:`write_report`).

The top stage: it imports the judge, record, plan and agents stages; above it are only the
pipelines (:mod:`~agentunit_gym.eval.evaluate`, :mod:`~agentunit_gym.eval.judging`,
:mod:`~agentunit_gym.eval.taskcheck`).
"""

from agentunit_gym.eval.report.html import write_report

__all__ = ["write_report"]
