"""The KG domain's description: every fact the rest of agentunit-gym reads about it."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.domain import BackendSpec, Domain, DomainImage, EnvSpec, TaskGenerator, TaskLoader
from agentunit_gym.domains.kg.agentbench import collect_agentbench_kg, looks_like_agentbench_kg
from agentunit_gym.domains.kg.keys import kg_task_keys
from agentunit_gym.domains.kg.metrics import HEADLINE, METRICS, REPORT_SECTIONS
from agentunit_gym.domains.kg.prompt import PROMPT
from agentunit_gym.domains.kg.protocols import PROTOCOLS
from agentunit_gym.domains.kg.task import KGTask

_HERE = Path(__file__).parent
_IMAGES = _HERE.parent.parent / "images"

STEP_LIMIT = 15
"""AgentBench's turn limit for the KG task."""

DOMAIN = Domain(
    name="kg",
    title="Knowledge graph",
    description="The agent answers a question about a knowledge graph by calling seven tools that build a "
                "query step by step (get_relations, get_neighbors, intersection, get_attributes, argmax, "
                "argmin, count), then commits a variable with 'Final Answer: #k' (graded by answer F1).",
    envs=(EnvSpec("AgentUnit/KG-v0", "agentunit_gym.domains.kg.env:KGEnv"),),
    step_limit=STEP_LIMIT,
    backends=(
        BackendSpec("embedded", "pyoxigraph in the env's process on the bundled graph's cached store, no daemon",
                    embedded=True),
        BackendSpec("sparql", "any SPARQL 1.1 endpoint (endpoint=URL): the kg image, or a Freebase server"),
    ),
    backend_factory="agentunit_gym.backends.sparql.factory:open_sparql_backend",
    task_model=KGTask,
    loaders=(
        TaskLoader("agentbench", "AgentBench's knowledgegraph JSON: dev.json or std.json, or the data/ or "
                                 "data/knowledgegraph/ folder holding them (Freebase items: a Freebase endpoint)",
                   detect=looks_like_agentbench_kg, load=collect_agentbench_kg),
    ),
    suite=_HERE / "suite",
    task_keys=kg_task_keys,
    generator=TaskGenerator(
        "questions from 14 templates (the bundled suite's nine and five more) over every fitting entity of the "
        "bundled graph, answers computed from the graph (~24k distinct questions)",
        generate="agentunit_gym.domains.kg.generate:generate",
        templates="agentunit_gym.domains.kg.generate:templates",
        ceiling="agentunit_gym.domains.kg.generate:ceiling",
    ),
    traps=_HERE / "traps.yaml",
    criteria=_HERE / "criteria.yaml",
    prompt=PROMPT,
    metrics=METRICS,
    headline=HEADLINE,
    report_sections=REPORT_SECTIONS,
    protocols=PROTOCOLS,
    image=DomainImage("kg", _IMAGES / "kg", generator="agentunit_gym.domains.kg.image"),
)
