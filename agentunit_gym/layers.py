"""The package's layers, top first: a module imports only from its own layer and the ones below.

This table is the one statement of the order: ``tests/test_layers.py`` reads it and fails on
an import (a function-level one too) or a ``"module:attribute"`` string that points up, and
on a module that no layer holds; it also checks that the README's "Layout" lists the same
folders in the same order. A new top-level folder of ``agentunit_gym/`` gets its row here.

>>> [layer.name for layer in LAYERS][:3]
['package', 'cli', 'integrations']
>>> layer_of("agentunit_gym.backends.sandbox.docker").name
'backends'
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layer:
    """One layer: the top-level modules and folders of ``agentunit_gym`` it holds."""

    name: str
    parts: tuple[str, ...]
    """Top-level names under ``agentunit_gym`` (a folder or a module, without ``.py``)."""
    role: str
    """What lives there, in one line."""
    separate_children: bool = False
    """Its sub-packages never import one another (one folder per domain)."""


LAYERS: tuple[Layer, ...] = (
    Layer("package", ("__init__", "__main__", "layers"),
          "the public names, the registration of every env id on import, `python -m agentunit_gym`"),
    Layer("cli", ("cli",), "thin commands: eval, judge, tasks, export, serve, mcp, images, cleanup"),
    Layer("integrations", ("integrations",),
          "adapters to trainers' and evaluators' APIs (skyrl, verifiers, inspect); optional extras, lazy imports"),
    Layer("serve", ("serve",), "the env server (OpenEnv-compatible), the MCP server, the Remote-v0 client env"),
    Layer("eval", ("eval",),
          "the evaluator (its sub-packages are one layer): plan, run, record, report, agents, judge"),
    Layer("wrappers", ("wrappers",),
          "one concern each: limits, classification, traps, traces; each declares its info keys"),
    Layer("domains", ("domains",), "one folder per domain (os, db, kg, webshop)", separate_children=True),
    Layer("core", ("core",), "AgentEnv, FinishReason, Score, typed info, the Domain description and its registry"),
    Layer("backends", ("backends",), "shared engines: sandbox kinds (an entry-point group), sql, sparql, shop, images"),
    Layer("images", ("images",), "what runs inside the boxes: Dockerfiles and stdlib-only programs"),
    Layer("prebuilt", ("prebuilt",),
          "data built ahead and shipped in the package (the WebShop index, the KG triples) and their unpacking"),
    Layer("tasks", ("tasks",), "the TaskSpec base, task-file reading, the `--tasks` format detection"),
    Layer("errors", ("errors", "version"), "one root exception and a flat hierarchy; the version"),
)
"""Every layer, top first."""


def layer_of(module: str) -> Layer:
    """The layer that holds ``module`` (a dotted name under ``agentunit_gym``).

    Raises:
        KeyError: no layer holds it (a new top-level folder without a row in :data:`LAYERS`).
    """
    parts = module.split(".")
    if parts[0] != "agentunit_gym":
        raise KeyError(f"{module} is not a module of agentunit_gym")
    top = parts[1] if len(parts) > 1 else "__init__"
    for layer in LAYERS:
        if top in layer.parts:
            return layer
    raise KeyError(f"no layer of agentunit_gym.layers.LAYERS holds {module}; add its folder to one")


def rank(layer: Layer) -> int:
    """The layer's position, 0 at the top: a module may import from layers of equal or greater rank."""
    return LAYERS.index(layer)
