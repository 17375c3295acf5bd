"""What makes two DB tasks the same task (the overlap keys, :mod:`agentunit_gym.tasks.overlap`).

- instruction: whitespace and case normalised, numbers and quoted values masked (the values
  the generator draws from the table);
- reference: the reference SQL formatted by ``sqlparse`` (keywords upper case, comments
  stripped, whitespace collapsed; without ``sqlparse`` the whitespace is collapsed only);
- answer: for SELECT-family tasks, the sorted gold values with their target: the table(s),
  the columns the reference SQL reads, the values it names (its literals) and the functions
  and comparisons it applies, so the same question asked in other words or laid out otherwise
  is found, and another question with an equal answer (a SUM and an AVG over one row) is not;
  modifications have none (their gold is a table state, which their reference key pins).

Example:

    >>> from agentunit_gym.domains.db.keys import normalise_sql
    >>> normalise_sql("select  min(x) -- lowest\\nfrom t where s = 'A'")
    "SELECT min(x) FROM t WHERE s = 'A'"
"""

from __future__ import annotations

import functools
import re

from agentunit_gym.tasks.overlap import TaskKeys, canonical_json, collapse, mask_values
from agentunit_gym.tasks.spec import TaskSpec

_SPACE = re.compile(r"\s+")
_FUNCTION = re.compile(r"\b([A-Za-z_]+)\s*\(")
_COMPARISON = re.compile(r"[<>=!]+|\b(?:LIKE|IN|BETWEEN|NOT)\b", re.IGNORECASE)
_LITERAL = re.compile(r"'(?:[^']|'')*'|(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")


@functools.lru_cache(maxsize=1 << 16)  # sqlparse takes ~1 ms a statement; generated sets repeat them
def normalise_sql(sql: str) -> str:
    """``sql`` with keywords upper case, comments stripped and whitespace collapsed, no trailing ``;``."""
    try:
        import sqlparse
    except ImportError:  # the db extra is not installed: whitespace only
        return _SPACE.sub(" ", sql).strip().rstrip(";").strip()
    text = sqlparse.format(sql, keyword_case="upper", strip_comments=True, strip_whitespace=True,
                           use_space_around_operators=True)
    return _SPACE.sub(" ", str(text)).strip().rstrip(";").strip()


def sql_shape(sql: str) -> str:
    """``sql`` normalised with its literals masked: what the statements of one family share.

    Example: ``sql_shape("select min(x) from t where s = 'A'")`` is ``"SELECT min(x) FROM t WHERE s = <v>"``.
    """
    return _LITERAL.sub(lambda m: "<v>" if m.group(0).startswith("'") else "#", normalise_sql(sql))


def _literal(text: str) -> str:
    if text.startswith("'"):
        return text[1:-1].replace("''", "'")
    number = float(text)
    return str(int(number)) if number.is_integer() else repr(number)


def db_task_keys(task: TaskSpec) -> TaskKeys:
    """The DB task's overlap keys (see the module docstring)."""
    from agentunit_gym.domains.db.task import DBTask

    if not isinstance(task, DBTask):
        return TaskKeys(collapse(task.instruction), None, None)
    reference = canonical_json([normalise_sql(q) for q in task.reference_sql]) if task.reference_sql else None
    answer = None
    if task.answer is not None and not task.is_modification:
        sql = " ".join(task.reference_sql)
        columns = sorted({c.name.lower() for t in task.tables for c in t.columns
                          if re.search(rf"\b{re.escape(c.name)}\b", sql, flags=re.IGNORECASE)})
        literals = sorted({_literal(m.group(0)) for m in _LITERAL.finditer(sql)})
        bare = _LITERAL.sub(" ", sql)
        operations = sorted({f.upper() for f in _FUNCTION.findall(bare)}
                            | {o.upper() for o in _COMPARISON.findall(bare)})
        answer = canonical_json([sorted(t.name.lower() for t in task.tables), columns, literals, operations,
                                 sorted(task.answer)])
    return TaskKeys(mask_values(task.instruction), reference, answer)
