"""Every bundled DB task whose SQL has the shape of a generator family's statements over the same
table (literals aside) is marked as an instance of that family (issue 33), so its split is the
family's; tools/make_db_tasks.py's FAMILIES lists them."""

from __future__ import annotations

from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.generate import candidates
from agentunit_gym.domains.db.keys import sql_shape
from agentunit_gym.tasks.splits import split_of_family


def _limit(sql: str) -> str:
    return sql.rsplit("LIMIT", 1)[-1].strip() if "LIMIT" in sql else ""


def test_every_bundled_instance_of_a_family_names_it() -> None:
    shapes: dict[tuple[str, str, str], set[str]] = {}
    for c in candidates():
        shapes.setdefault((c.table, sql_shape(c.sql), _limit(c.sql)), set()).add(c.template)
    found = {}
    for task in get_domain("db").bundled_tasks():
        sql = " ; ".join(task.reference_sql)
        families = shapes.get((task.tables[0].name, sql_shape(sql), _limit(sql)))
        if families:
            assert len(families) == 1, (task.id, families)
            found[task.id] = families.pop()
    marked = {t.id: t.template for t in get_domain("db").bundled_tasks() if t.template}
    assert marked == found
    assert len(found) == 26
    assert all(t.split == split_of_family(t.template) for t in get_domain("db").bundled_tasks() if t.template)
