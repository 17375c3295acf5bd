"""What makes two WebShop goals the same goal (the overlap keys, :mod:`agentunit_gym.tasks.overlap`).

- instruction: whitespace and case normalised, numbers (the price limit) masked;
- reference: the reference shop visit (searches and clicks) as canonical JSON, whitespace collapsed;
- answer: the purchase, with its target: the catalog, the product's ASIN and the goal's options.
"""

from __future__ import annotations

from agentunit_gym.tasks.overlap import TaskKeys, canonical_json, default_task_keys, mask_values, reference_calls
from agentunit_gym.tasks.spec import TaskSpec


def webshop_task_keys(task: TaskSpec) -> TaskKeys:
    """The WebShop goal's overlap keys (see the module docstring)."""
    from agentunit_gym.domains.webshop.task import WebShopTask

    if not isinstance(task, WebShopTask):
        return default_task_keys(task)
    reference = reference_calls(task) if task.reference_solution else None
    answer = canonical_json([task.catalog, task.asin, sorted(task.goal_options.items())])
    return TaskKeys(mask_values(task.instruction), reference, answer)
