"""What makes two OS tasks the same task (the overlap keys, :mod:`agentunit_gym.tasks.overlap`).

- instruction: whitespace and case normalised, numbers and quoted values masked (the drawn
  names keep their word and lose their number: ``/root/amber_12`` reads ``/root/amber_#``);
- reference: the reference calls as canonical JSON, each shell command with its whitespace
  runs collapsed;
- answer: the expected answer (the match, else the reference's answer) with its target, the
  world the init scripts make (whitespace collapsed); a task that only changes the system
  has none.
"""

from __future__ import annotations

from agentunit_gym.tasks.overlap import TaskKeys, canonical_json, collapse, default_task_keys, mask_values
from agentunit_gym.tasks.spec import TaskSpec


def _shell(text: str) -> str:
    return " ".join(text.split())


def os_task_keys(task: TaskSpec) -> TaskKeys:
    """The OS task's overlap keys (see the module docstring)."""
    from agentunit_gym.domains.os.task import OSTask
    from agentunit_gym.tasks.overlap import reference_calls

    if not isinstance(task, OSTask):
        return default_task_keys(task)
    reference = reference_calls(task, normalise=_shell) if task.reference_solution else None
    expected: str | None = None
    match = task.evaluation.match
    if match is not None:
        expected = match.answer if match.answer is not None else f"regex:{match.regex}"
    elif task.reference_solution and task.reference_solution[-1].tool == "answer":
        arguments = task.reference_solution[-1].arguments
        expected = arguments if isinstance(arguments, str) else canonical_json(arguments)
    answer = None
    if expected is not None:
        world = [_shell(s.code or s.file or s.builtin or "") for s in task.init]
        answer = canonical_json([world, collapse(expected)])
    return TaskKeys(mask_values(task.instruction), reference, answer)
