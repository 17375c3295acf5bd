"""The checkout parser on the Python constructs AgentBench's real task modules use.

tests/fixtures/agentbench_checkout mirrors the layout of AgentBench's v0.2 task modules (its
README names the file and commit each stand-in follows) with our own text. These tests pin
what the parser makes of each construct found there: multi-line ``inject({...})`` calls,
triple-quoted and implicitly concatenated literals (a backslash continuation inside one),
adjacent f-strings, a conditional message, ``+=`` in parentheses, later injects in the loops,
and names reassigned by tuple unpacking.
"""

from __future__ import annotations

from pathlib import Path

from agentunit_gym.tasks.agentbench_checkout import Slot, TaskModule

CHECKOUT = Path(__file__).resolve().parents[1] / "fixtures" / "agentbench_checkout"


def shape(module: TaskModule, function: str) -> list[tuple[str | None, tuple[str | Slot, ...]]]:
    return [(item.role, item.content.parts) for item in module.injected(function)]


def test_db_module_start_sample() -> None:
    module = TaskModule(CHECKOUT, "dbbench/__init__.py")
    big_prompt = module.constant("big_prompt")
    assert shape(module, "start_sample") == [
        ("user", (big_prompt,)),
        ("agent", ("STAND-IN DB OK.",)),
        ("user", (Slot(0), "\n", Slot(1))),  # read through `prompt = a + "\n" + b`
        ("user", (Slot(0),)),               # the loop's SQL output
        ("user", ("",)),
    ]


def test_os_module_judge() -> None:
    module = TaskModule(CHECKOUT, "os_interaction/task.py")
    shots = module.constant("ONE_SHOT")
    assert shots[2]["content"] == "The output of the OS:\n3"  # implicit concatenation
    assert shots[1]["content"].endswith("\n\n```bash\nls /srv | wc -l\n```")  # triple-quoted
    assert shape(module, "_judge") == [
        ("user", ("STAND-IN OS INSTRUCTIONS: act like a shell user.\n\n",)),
        ("user", ("STAND-IN NEW PROBLEM: ", Slot(0))),
        ("user", (Slot(0),)),  # a conditional message is one slot
    ]
    assert [t.parts for t in module.appended("_judge")] == [("STAND-IN OPENER: ", Slot(0))] * 2


def test_kg_module_start_sample() -> None:
    module = TaskModule(CHECKOUT, "knowledgegraph/task.py")
    assert shape(module, "start_sample") == [
        ("user", (module.constant("INSTRUCTIONS"),)),
        ("agent", ("STAND-IN KG UNDERSTOOD.",)),
        ("user", (Slot(0),)),
        ("agent", (Slot(0),)),
        ("user", ("STAND-IN QUESTION: ", Slot(0), "\nSTAND-IN ENTITIES: ", "[", Slot(1), "]")),
        ("user", ("STAND-IN BAD VARIABLE.",)),
        ("user", (Slot(0),)),  # execution_message: assigned a literal, then unpacked from a call
    ]


def test_webshop_module_start_sample() -> None:
    module = TaskModule(CHECKOUT, "webshop/__init__.py")
    # An annotated module-level literal with a backslash continuation inside the triple quotes.
    assert module.constant("prompt") == "\nSTAND-IN WEBSHOP INSTRUCTIONS: search[...] or click[...].\n"
    assert shape(module, "start_sample") == [
        ("user", (module.constant("prompt"),)),
        ("agent", ("STAND-IN SHOP OK.",)),
        ("user", ("Observation:\nSTAND-IN SHOT PAGE\n\nAvailable Actions:\n{}",)),  # single-quoted keys
        ("agent", ("Thought:\nSTAND-IN search.\n\nAction:\nsearch[socks]",)),
        ("user", ("STAND-IN PAGE:\n", Slot(0), "\n\nSTAND-IN ACTIONS:\n", Slot(1))),  # two adjacent f-strings
    ]


def test_a_name_reassigned_by_unpacking_is_not_read_as_its_first_value(tmp_path: Path) -> None:
    # AgentBench's loops reassign names by unpacking (WebShop's `observation, reward, done, info =
    # env.step(action)`, KG's `execution, execution_message = func(*arguments)`): such a name holds
    # more than its first value, so a message built from it is a slot, not that first literal.
    tasks = tmp_path / "src" / "server" / "tasks" / "shop"
    tasks.mkdir(parents=True)
    (tasks / "task.py").write_text(
        "async def start_sample(self, session):\n"
        "    page = 'FIRST PAGE'\n"
        "    for _ in range(3):\n"
        "        session.inject({'role': 'user', 'content': 'Page: ' + page})\n"
        "        page, reward = self.step()\n"
        "        note = 'kept'\n"
        "        [first, *rest] = self.more()\n"
        "        session.inject({'role': 'user', 'content': note + first})\n",
        encoding="utf-8")
    module = TaskModule(tmp_path, "shop/task.py")
    assert shape(module, "start_sample") == [("user", ("Page: ", Slot(0))), ("user", ("kept", Slot(0)))]
