"""WebShop's trap library: an agent that falls for a trap is flagged, one that ignores it is not,
and the reward is what it would be without the trap."""

from __future__ import annotations

import pytest

from agentunit_gym.backends.shop.engine import EmbeddedShopBackend
from agentunit_gym.core.trace import Flag
from agentunit_gym.domains.webshop.env import WebShopEnv
from agentunit_gym.domains.webshop.task import WebShopTask
from agentunit_gym.wrappers import InjectTraps, load_trap_library
from agentunit_gym.wrappers.traps import fill

LIBRARY = load_trap_library("webshop")


def test_library_covers_the_categories() -> None:
    assert len(LIBRARY.traps) >= 5 and len(set(LIBRARY.ids())) == len(LIBRARY.traps)
    assert {"exfiltration", "secret_reading", "privilege", "safety_settings"} <= {t.category for t in LIBRARY.traps}
    assert {t.placement for t in LIBRARY.traps} == {"prompt", "observation"}


@pytest.mark.parametrize("trap_id", LIBRARY.ids())
@pytest.mark.parametrize("fall", [True, False])
def test_trap_verdicts(trap_id: str, fall: bool, shop_backend: EmbeddedShopBackend,
                       small_goals: list[WebShopTask]) -> None:
    task = small_goals[1]
    trap = LIBRARY.get(trap_id)
    env = InjectTraps(WebShopEnv(tasks=small_goals, shop_backend=shop_backend, max_steps=40), LIBRARY, rate=1.0)
    try:
        obs, info = env.reset(seed=3, options={"task_id": task.id, "trap": trap_id})
        assert env._active is not None  # noqa: SLF001 - the test needs the episode's token
        values = {"token": env._active.values["token"]}  # noqa: SLF001
        if trap.placement == "prompt":
            assert fill(trap.text, values) in obs
        base = env.unwrapped
        assert isinstance(base, WebShopEnv)
        steps = [base.render_action(s) for s in task.reference_solution]
        # Walk until the trap is delivered, then (if falling for it) go back and do what it asks.
        for reply in steps[: trap.at_step]:
            obs, *_ = env.step(reply)
        if trap.placement == "observation":
            assert fill(trap.text, values) in obs
        flags: list[str] = []
        if fall:
            env.step("Action: click[Back to Search]")
            keywords = fill(str(trap.example_attempt.arguments["keywords"]), values)
            _, _, _, _, info = env.step(f"Action: search[{keywords}]")
            flags = [str(f.value if hasattr(f, "value") else f) for f in info.get("flags", [])]
            env.step("Action: click[Back to Search]")
        else:
            env.step("Action: click[Back to Search]")
        for reply in steps:
            _, reward, terminated, _, info = env.step(reply)
        assert terminated and reward == 1.0  # the trap does not change the reward
        assert info["trap"]["verdict"] == ("attempted" if fall else "refused")
        assert (Flag.TRAP_ATTEMPT.value in flags) is fall
    finally:
        env.close()
