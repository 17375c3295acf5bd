"""AgentBench's Freebase ontology vocabulary, read from the user's AgentBench checkout.

AgentBench's KG task lists only the relations and attributes its ontology names: its
``ontology/vocab.json`` holds ``{"relations": [...], "attributes": [...]}``, and its
``ontology/fb_roles`` gives each relation's range (lines ``DOMAIN RELATION RANGE``). Given a
checkout, the Freebase env filters what the store returns the same way; without one,
relations and attributes come from the store (docs/envs/kg.md, "Differences from AgentBench").

Example (not run: it needs an AgentBench checkout and its SPARQL endpoint)::

    vocabulary = agentbench_vocabulary(Path("AgentBench"))
    env = KGEnv(endpoint="http://host:8890/sparql", tasks="AgentBench/data/knowledgegraph/std.json",
                ontology="AgentBench")   # or found from the tasks' path, as here
"""

from __future__ import annotations

import json
from pathlib import Path

from agentunit_gym.domains.kg.tools import GENERIC_TYPE, Vocabulary
from agentunit_gym.errors import AgentBenchCheckoutError
from agentunit_gym.tasks.agentbench_checkout import TASKS_DIR, find_checkout

ONTOLOGY_DIR = TASKS_DIR / "knowledgegraph" / "ontology"
"""Where an AgentBench checkout keeps the KG ontology."""


def ontology_folder(path: str | Path) -> Path:
    """The ontology folder of ``path``: an AgentBench checkout (or a path inside one), or the
    ontology folder itself (one holding ``vocab.json``).

    Raises:
        AgentBenchCheckoutError: neither.
    """
    given = Path(path).resolve()
    if (given / "vocab.json").is_file():
        return given
    root = find_checkout(given)
    if root is not None and (root / ONTOLOGY_DIR / "vocab.json").is_file():
        return root / ONTOLOGY_DIR
    raise AgentBenchCheckoutError(
        f"ontology={path}: expected an AgentBench checkout (holding {ONTOLOGY_DIR}/vocab.json) or that "
        "ontology folder, found neither. Give the checkout's top folder, or ontology=False to take relations "
        "and attributes from the store.")


def agentbench_vocabulary(path: str | Path) -> Vocabulary:
    """The relations (with their ranges) and attributes AgentBench's ontology names.

    A relation ``fb_roles`` gives no range for gets ``common.topic``, as the store-read
    vocabulary does (AgentBench's own code fails the call there).

    Raises:
        AgentBenchCheckoutError: the folder is not found, or ``vocab.json`` is not the
            ``{"relations": [...], "attributes": [...]}`` AgentBench ships.
    """
    folder = ontology_folder(path)
    vocab_file = folder / "vocab.json"
    try:
        vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
        relations = [str(r) for r in vocab["relations"]]
        attributes = frozenset(str(a) for a in vocab["attributes"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise AgentBenchCheckoutError(
            f"{vocab_file}: expected AgentBench's {{\"relations\": [...], \"attributes\": [...]}} ({exc}).") from None
    ranges: dict[str, str] = {}
    roles = folder / "fb_roles"
    if roles.is_file():
        for line in roles.read_text(encoding="utf-8").splitlines():
            fields = line.split()
            if len(fields) >= 3:
                ranges[fields[1]] = fields[2]
    return Vocabulary({r: ranges.get(r, GENERIC_TYPE) for r in relations}, attributes)


__all__ = ["ONTOLOGY_DIR", "agentbench_vocabulary", "ontology_folder"]
