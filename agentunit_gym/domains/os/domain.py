"""The OS domain's description: every fact the rest of agentunit-gym reads about it."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.backends.sandbox.kinds import kinds as sandbox_kinds
from agentunit_gym.core.domain import (
    BackendSpec,
    Domain,
    DomainImage,
    EnvSpec,
    ReportSection,
    TaskGenerator,
    TaskLoader,
)
from agentunit_gym.domains.os.agentbench import collect_agentbench_os, is_agentbench_os
from agentunit_gym.domains.os.keys import os_task_keys
from agentunit_gym.domains.os.prompt import PROMPT
from agentunit_gym.domains.os.protocols import PROTOCOLS
from agentunit_gym.domains.os.task import OSTask

_HERE = Path(__file__).parent
_IMAGES = _HERE.parent.parent / "images"

STEP_LIMIT = 8
"""AgentBench's turn limit for OS interaction."""

DOMAIN = Domain(
    name="os",
    title="OS interaction",
    description="The agent works in one persistent bash inside a sandbox, then answers a question "
                "or says it changed the system; graded by an exact match or a check pipeline.",
    envs=(EnvSpec("AgentUnit/OS-v0", "agentunit_gym.domains.os.env:OSEnv"),),
    step_limit=STEP_LIMIT,
    # Every registered sandbox kind (docker, local, third parties': the agentunit_gym.sandboxes
    # entry points), in the registry's order.
    backends=tuple(BackendSpec(kind.name, kind.description, embedded=kind.embedded, needs_docker=kind.needs_docker,
                               options_from=(kind.sandbox,)) for kind in sandbox_kinds()),
    backend_factory="agentunit_gym.backends.sandbox.factory:open_sandbox",
    task_model=OSTask,
    loaders=(
        TaskLoader("agentbench", "an AgentBench checkout's data/ (or data/os_interaction/) folder: dev.json "
                                 "and the numbered test folders, with their scripts",
                   detect=is_agentbench_os, load=collect_agentbench_os),
    ),
    suite=_HERE / "suite",
    task_keys=os_task_keys,
    generator=TaskGenerator(
        "21 templated families (files, permissions, text processing, archives, processes, users: "
        "agentunit_gym/domains/os/templates.yaml) with drawn names, counts, sizes, modes and contents; "
        "the users families set needs_users",
        generate="agentunit_gym.domains.os.generate:generate",
        templates="agentunit_gym.domains.os.generate:templates",
    ),
    traps=_HERE / "traps.yaml",
    criteria=_HERE / "criteria.yaml",
    prompt=PROMPT,
    protocols=PROTOCOLS,
    network=True,
    report_sections=(
        ReportSection("OS: grading", ("exact_match", "success_rate", "step_efficiency"),
                      "Tasks graded by a match compare the answer; check tasks run their pipeline."),
    ),
    image=DomainImage("os", _IMAGES / "os"),
)
