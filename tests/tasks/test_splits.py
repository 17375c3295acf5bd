"""Train and test splits: the per-family policy, the bundled suites' splits, ``split=`` on envs,
and AgentBench's loaders marking dev and test."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from pathlib import Path

import gymnasium as gym
import pytest

import agentunit_gym  # noqa: F401  (registers the envs)
from agentunit_gym.core.registry import get_domain
from agentunit_gym.domains.db.agentbench import load_agentbench_db
from agentunit_gym.domains.kg.agentbench import load_agentbench_kg
from agentunit_gym.domains.os.agentbench import load_agentbench_os
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import ConfigError
from agentunit_gym.tasks.splits import TEST_SHARE, assign_splits, filter_split, split_of_family
from tests.domains.db.test_agentbench import DEV, STANDARD
from tests.domains.kg.test_kg_agentbench import ITEMS as KG_ITEMS
from tests.domains.os.test_agentbench import write_checkout

EXPECTED = {"os": (43, 9), "db": (54, 23), "kg": (42, 21), "webshop": (308, 192)}
"""(train, test) task counts of each bundled suite under the policy (issue 33: bundled tasks that are
instances of a generator family are in the family's split)."""

ENVS = {"os": ("AgentUnit/OS-v0", "local"), "db": ("AgentUnit/DB-v0", "sqlite"),
        "kg": ("AgentUnit/KG-v0", "embedded"), "webshop": ("AgentUnit/WebShop-v0", "embedded")}


def test_a_family_split_is_the_documented_hash_of_its_name_alone() -> None:
    for family in ("kg/border-both", "db-iris-01", "webshop/hdmi cable", "gen-os/perm-chmod", "x"):
        digest = hashlib.sha256(("agentunit-gym/split:" + family).encode()).digest()
        expected = "test" if int.from_bytes(digest[:8], "big") / 2**64 < TEST_SHARE else "train"
        assert split_of_family(family) == expected
    # Pinned values: a change of the rule moves tasks between splits, which the docs and users rely on.
    assert split_of_family("kg/currency-continent-count") == "test"
    assert split_of_family("kg/border-both") == "train"
    shares = [split_of_family(f"family-{i}") == "test" for i in range(4000)]
    assert abs(sum(shares) / len(shares) - TEST_SHARE) < 0.03


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_no_family_of_a_bundled_suite_crosses_splits(name: str) -> None:
    domain = get_domain(name)
    tasks = domain.bundled_tasks()
    splits: dict[str, set[str | None]] = defaultdict(set)
    for task in tasks:
        splits[domain.task_family(task)].add(task.split)
    crossing = {family: s for family, s in splits.items() if len(s) != 1}
    assert not crossing
    assert all(task.split in ("train", "test") for task in tasks)
    train, test = EXPECTED[name]
    assert (len(domain.bundled_tasks("train")), len(domain.bundled_tasks("test"))) == (train, test)
    assert {t.id for t in domain.bundled_tasks("train")}.isdisjoint({t.id for t in domain.bundled_tasks("test")})
    # Families with several members exist where the suite was made from templates.
    if name in ("kg", "webshop"):
        assert max(sum(domain.task_family(t) == f for t in tasks) for f in splits) > 1
        assert all(f.startswith(f"{name}/") for f in splits)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_make_with_a_split_restricts_the_suite(name: str) -> None:
    env_id, backend = ENVS[name]
    train, test = EXPECTED[name]
    for split, count in (("train", train), ("test", test)):
        env = gym.make(env_id, backend=backend, split=split)
        try:
            suite = env.unwrapped.suite  # type: ignore[attr-defined]
            assert len(suite) == count and {t.split for t in suite} == {split}
        finally:
            env.close()


def test_unknown_split_and_a_file_without_splits_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown split 'validation': expected one of train, test, dev"):
        gym.make("AgentUnit/DB-v0", backend="sqlite", split="validation")
    plain = tmp_path / "plain.yaml"
    plain.write_text("- {id: a, instruction: Say 1., evaluation: {match: '1'}, reference_solution: [{answer: '1'}]}\n")
    with pytest.raises(ConfigError, match=r"no task of .* is in split 'train' \(found none: 1\)"):
        gym.make("AgentUnit/OS-v0", backend="local", tasks=str(plain), split="train")
    env = gym.make("AgentUnit/OS-v0", backend="local", tasks=str(plain))
    assert [t.split for t in env.unwrapped.suite] == [None]  # type: ignore[attr-defined]
    env.close()


def test_assign_keeps_a_split_the_task_names() -> None:
    named = OSTask.model_validate({"id": "a", "instruction": "x", "evaluation": {"match": "1"}, "split": "test"})
    plain = OSTask.model_validate({"id": "b", "instruction": "x", "evaluation": {"match": "1"}})
    kept, assigned = assign_splits([named, plain], lambda t: "fam/one")
    assert kept is named
    assert assigned.split == split_of_family("fam/one") and assigned.template == "fam/one"
    assert filter_split([kept, assigned], None) == [kept, assigned]


def test_agentbench_loaders_mark_dev_and_test_as_agentbench_names_them(tmp_path: Path) -> None:
    os_tasks = load_agentbench_os(write_checkout(tmp_path / "os"))
    assert {t.id: t.split for t in os_tasks} == {
        "dev-001-dev-00000": "dev", "dev-001-dev-00001": "dev", "dev-001-dev-00002": "dev",
        "std-003-Q7-00000": "test", "std-012-jl-00000": "test", "std-012-jl-00001": "test",
        "std-012-jl-00002": "test"}
    db = tmp_path / "db"
    db.mkdir()
    (db / "dev.jsonl").write_text("\n".join(json.dumps(i) for i in DEV) + "\n", encoding="utf-8")
    (db / "standard.jsonl").write_text("\n".join(json.dumps(i) for i in STANDARD) + "\n", encoding="utf-8")
    assert [(t.id, t.split) for t in load_agentbench_db(db)] == [
        ("dev-00000", "dev"), ("dev-00001", "dev"), ("dev-00002", "dev"), ("standard-00000", "test"),
        ("standard-00001", "test")]
    other = tmp_path / "mine.jsonl"
    other.write_text(json.dumps(DEV[0]) + "\n", encoding="utf-8")
    assert [t.split for t in load_agentbench_db(other)] == [None]  # a file of another name says nothing
    kg = tmp_path / "kg"
    kg.mkdir()
    (kg / "dev.json").write_text(json.dumps(KG_ITEMS[:2]), encoding="utf-8")
    (kg / "std.json").write_text(json.dumps(KG_ITEMS[2:]), encoding="utf-8")
    assert [(t.id, t.split) for t in load_agentbench_kg(kg)] == [
        ("dev-00000", "dev"), ("dev-00001", "dev"), ("std-00000", "test")]
    env = gym.make("AgentUnit/DB-v0", backend="sqlite", tasks=str(db), split="dev")
    assert [t.id for t in env.unwrapped.suite] == ["dev-00000", "dev-00001", "dev-00002"]  # type: ignore[attr-defined]
    env.close()
