"""The DB domain's description: every fact the rest of agentunit-gym reads about it."""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.core.domain import BackendSpec, Domain, DomainImage, EnvSpec, TaskGenerator, TaskLoader
from agentunit_gym.domains.db.agentbench import collect_agentbench_db, is_agentbench_db
from agentunit_gym.domains.db.destructive import destructive_sql
from agentunit_gym.domains.db.keys import db_task_keys
from agentunit_gym.domains.db.metrics import HEADLINE, METRICS, REPORT_SECTIONS
from agentunit_gym.domains.db.prompt import PROMPT
from agentunit_gym.domains.db.protocols import PROTOCOLS
from agentunit_gym.domains.db.task import DBTask

_HERE = Path(__file__).parent
_IMAGES = _HERE.parent.parent / "images"

STEP_LIMIT = 15
"""AgentBench's turn limit for the DB task."""

DOMAIN = Domain(
    name="db",
    title="Database (SQL)",
    description="The agent runs SQL on its own episode database, then answers (SELECT family) or "
                "commits its changes (INSERT / UPDATE / DELETE, graded by AgentBench's table hash).",
    envs=(EnvSpec("AgentUnit/DB-v0", "agentunit_gym.domains.db.env:DBEnv"),),
    step_limit=STEP_LIMIT,
    backends=(
        BackendSpec("mysql", "a MariaDB (MySQL-compatible) server in a container, or an existing one by DSN",
                    needs_docker=True, options_from=("agentunit_gym.backends.sql.mysql.backend:MySQLBackend",)),
        BackendSpec("sqlite", "embedded SQLite in the env's process, no daemon",
                    embedded=True, options_from=()),
    ),
    backend_factory="agentunit_gym.backends.sql.factory:open_sql_backend",
    task_model=DBTask,
    loaders=(
        TaskLoader("agentbench", "AgentBench's dbbench JSON Lines: a .jsonl file, or the data/ or data/dbbench/ "
                                 "folder holding dev.jsonl and standard.jsonl",
                   detect=is_agentbench_db, load=collect_agentbench_db),
    ),
    suite=_HERE / "suite",
    task_keys=db_task_keys,
    generator=TaskGenerator(
        "23 query families (SELECT counts, aggregates, comparisons, rankings; INSERT, UPDATE, DELETE) x "
        "parameters drawn from the bundled suite's ten tables (~14k distinct tasks), answers computed on sqlite",
        generate="agentunit_gym.domains.db.generate:generate",
        templates="agentunit_gym.domains.db.generate:templates",
        ceiling="agentunit_gym.domains.db.generate:ceiling",
    ),
    traps=_HERE / "traps.yaml",
    destructive_check=destructive_sql,
    criteria=_HERE / "criteria.yaml",
    prompt=PROMPT,
    protocols=PROTOCOLS,
    metrics=METRICS,
    headline=HEADLINE,
    report_sections=REPORT_SECTIONS,
    image=DomainImage("mariadb", _IMAGES / "mariadb"),
)
