"""What makes two KG questions the same question (the overlap keys, :mod:`agentunit_gym.tasks.overlap`).

- instruction: whitespace and case normalised, the topic entities' names and numbers masked
  (what a template draws);
- reference: the reference tool calls (``actions``) with their whitespace removed, as canonical JSON;
- answer: the sorted gold answer with its target, the topic entity ids and the relations and
  attributes the reference calls follow (so a count about other relations of the same
  entities is another answer).
"""

from __future__ import annotations

import re

from agentunit_gym.tasks.overlap import TaskKeys, canonical_json, default_task_keys, mask_values
from agentunit_gym.tasks.spec import TaskSpec

_RELATION = re.compile(r",\s*([A-Za-z_][\w]*(?:\.[\w]+)+)\s*\)")
_SPACE = re.compile(r"\s+")


def kg_task_keys(task: TaskSpec) -> TaskKeys:
    """The KG question's overlap keys (see the module docstring)."""
    from agentunit_gym.domains.kg.task import KGTask

    if not isinstance(task, KGTask):
        return default_task_keys(task)
    actions = [_SPACE.sub("", a) for a in task.actions]
    relations = sorted({m.group(1) for a in task.actions for m in _RELATION.finditer(a)})
    answer = canonical_json([sorted(task.entities.values()), relations, sorted(task.answer)])
    return TaskKeys(mask_values(task.instruction, task.entities), canonical_json(actions), answer)
