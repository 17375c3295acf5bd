"""GRPO on DB-v0 with a real small model on CPU: SmolLM2-135M-Instruct, LoRA, the env's own reward.

A GRPO loop of our own in torch over gymnasium's ``SyncVectorEnv``: each step draws a few
generated DB train tasks, plays a group of episodes of each (one vector copy per episode,
every copy under :class:`~agentunit_gym.wrappers.ChatMessages`, the model replying for all
running copies in one batched ``generate``), normalises each episode's return within its
group (the advantage) and takes one policy-gradient step on the LoRA weights over every
token the model wrote. Every reward is the env's: the step rewards of ``ShapeReward`` with
``format_penalty(penalty, partial_credit)`` (docs/training.md, "Shaped rewards"); nothing
here scores a reply.

Why not TRL's ``GRPOTrainer``: its multi-turn path (``environment_factory``) drives the env
through tool calls that it parses out of the model's chat template, and SmolLM2's template
has no tool-call format; its single-turn path (``reward_funcs``) scores one completion, while
a DB episode needs the model to read its query's result before it answers. The loop below
is the same algorithm (group-normalised advantages, token-level loss, one update per batch
of rollouts so the importance ratio is 1, no KL term: TRL's defaults), over the env's own
multi-turn episodes.

Speed on 2 CPU cores: every prompt starts with the same 346 tokens (the system text, the
worked example, the grammar), so :class:`SharedPrefix` computes their key/value cache once
per policy and every batch only runs the rest (the question and the turns so far).

Run it (scripts/train-demo.sh makes the venv and runs the phases; docs/baselines.md)::

    python examples/train_grpo.py --gguf FILE --converted DIR --max-train-minutes 50 --output raw.json
    python examples/train_grpo.py --gguf FILE --phases after --adapter ADAPTER --shard 0/3 --output after-0.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import SyncVectorEnv

import agentunit_gym  # noqa: F401 - registers AgentUnit/DB-v0
from agentunit_gym.core.registry import get_domain
from agentunit_gym.wrappers import ChatMessages, ShapeReward, format_penalty, partial_credit

ENV_ID = "AgentUnit/DB-v0"
TRAIN_FAMILIES = ("gen-db/count-above", "gen-db/count-below", "gen-db/min-by-text", "gen-db/max-by-text",
                  "gen-db/min-by-threshold", "gen-db/max-by-threshold", "gen-db/rank-top")
"""Generated train families a 135M model can learn from: one-table SELECTs with a count, MIN/MAX
or the top row, each answered by one short query (all in the train split)."""


@dataclass(frozen=True)
class Config:
    """The run's settings (written into the results)."""

    group_size: int = 4
    """Episodes per task in a GRPO group."""
    groups_per_step: int = 2
    """Tasks per training step (the batch is ``groups_per_step * group_size`` episodes)."""
    max_steps: int = 1000
    max_train_minutes: float = 60.0
    """Training stops after the step that crosses this time (the evaluations are not counted)."""
    learning_rate: float = 2e-4
    lora_rank: int = 16
    max_turns: int = 2
    """The training env's turn limit (``max_episode_steps``): a query and an answer."""
    train_invalid_action: str = "continue"
    """The training env's ``invalid_action``: an invalid reply costs the penalty and the model reads
    the env's feedback and tries again, so a group's returns differ by how many replies were
    invalid (under "terminate", a base model whose every reply is invalid gives no signal)."""
    eval_max_turns: int = 2
    """The evaluation env's turn limit (the optimal episode's length). Evaluation always uses
    ``invalid_action="terminate"`` (AgentBench's protocol: the first invalid reply ends the episode as IF or IA)."""
    max_new_tokens: int = 64
    reply_opening: str = "Think:"
    """Text every reply starts with, given to the model after the chat template's generation prompt
    (the first word of the grammar's replies and of the worked example's). With it the base model
    wrote a valid action in 5 of 16 samples, without it in 0 of 16 (nor 0 of 128 training replies):
    GRPO learns nothing from groups whose replies are all invalid. Part of the policy, before and after."""
    temperature: float = 0.7
    eval_temperature: float = 0.7
    format_penalty: float = 0.5
    train_pool: int = 3000
    """Generated train tasks drawn before keeping the :data:`TRAIN_FAMILIES`."""
    eval_repeats_bundled: int = 9
    """Episodes per task of DB-v0's bundled test split (24 tasks: 216 episodes)."""
    eval_generated: int = 48
    """Generated test-split question tasks, one episode each (one batch: the 2-core machine's budget)."""
    eval_batch: int = 48
    micro_batch: int = 4
    prompt_grad: bool = False
    """Carry the gradient through the prompt's keys and values too (exact; 2-3 times the compute of
    an update on CPU). Off: the prompt is computed without gradient and only the reply's tokens are
    in the graph (LoRA's effect on how the prompt is encoded is left out of each update)."""
    seed: int = 0


EVAL_FIELDS = ("eval_max_turns", "max_new_tokens", "reply_opening", "eval_temperature", "format_penalty",
               "eval_repeats_bundled", "eval_generated", "eval_batch", "seed")
"""The settings an evaluation depends on: two runs that share them play the same episodes of the base model."""


@dataclass
class Episode:
    """One finished episode as the env reported it, with the tokens the model wrote."""

    task_id: str
    turns: list[tuple[list[int], list[int]]] = field(default_factory=list)
    """Per turn: the prompt's token ids after the shared prefix, and the reply's token ids."""
    replies: list[str] = field(default_factory=list)
    reward: float = 0.0
    """The sum of the env's step rewards (shaped)."""
    invalid_replies: int = 0
    """Replies the env classified as invalid (``info["action_error"]`` set)."""
    env_reward: float = 0.0
    """The env's own score (``info["score"]["reward"]``, AgentBench's)."""
    success: bool = False
    finish_reason: str = ""


def load_policy(gguf: Path, lora_rank: int, converted: Path | None = None,
                adapter: Path | None = None) -> tuple[Any, Any]:
    """SmolLM2 from the GGUF file (dequantised by transformers' loader) with fresh LoRA adapters.

    ``converted``: a folder for the dequantised model and tokenizer in transformers' own format,
    written on the first load and read after it (the conversion takes a minute; reading, seconds).
    LoRA's B matrices start at zero, so the policy equals the base model until the first update;
    ``adapter``: trained LoRA weights (``--save-adapter`` of an earlier run) instead.
    """
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if converted is not None and (converted / "config.json").exists():
        tokenizer = AutoTokenizer.from_pretrained(converted)
        model = AutoModelForCausalLM.from_pretrained(converted, dtype=torch.float32)
    else:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        if converted is not None:  # save_pretrained refuses a model loaded from GGUF: write its parts
            from safetensors.torch import save_model

            partial = converted.with_name(converted.name + ".partial")
            partial.mkdir(parents=True, exist_ok=True)
            config = model.config.to_dict()
            config.pop("quantization_config", None)
            (partial / "config.json").write_text(json.dumps(config), encoding="utf-8")
            save_model(model, str(partial / "model.safetensors"))
            tokenizer.save_pretrained(partial)
            partial.rename(converted)
    if adapter is not None:
        return PeftModel.from_pretrained(model, adapter), tokenizer
    lora = LoraConfig(r=lora_rank, lora_alpha=2 * lora_rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                      target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    return get_peft_model(model, lora), tokenizer


class SharedPrefix:
    """The token ids every prompt starts with, and their key/value cache for the current weights.

    :meth:`fit` shortens the prefix to what a new batch of prompts shares; :meth:`cache` gives a
    ``DynamicCache`` of the prefix for a batch (computed once per policy: call :meth:`invalidate`
    after an update). Bounded memory: one prefix's cache, expanded per batch.
    """

    def __init__(self) -> None:
        self.ids: list[int] | None = None
        self._kv: list[tuple[torch.Tensor, torch.Tensor]] | None = None

    def fit(self, rows: Sequence[list[int]]) -> None:
        shared = list(self.ids) if self.ids is not None else list(rows[0])
        for row in rows:
            n = 0
            while n < min(len(shared), len(row) - 1) and shared[n] == row[n]:
                n += 1
            shared = shared[:n]
        if self.ids is None or len(shared) < len(self.ids):
            self.ids, self._kv = shared, None

    def invalidate(self) -> None:
        self._kv = None

    def layers(self, model: Any, grad: bool = False) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, the prefix's keys and values (batch 1); with ``grad``, in the autograd graph."""
        if self.ids is None:
            raise ValueError("SharedPrefix.fit() first")
        if grad or self._kv is None:
            with torch.set_grad_enabled(grad):
                out = model(input_ids=torch.tensor([self.ids]), use_cache=True)
            kv = [(layer.keys, layer.values) for layer in out.cache.layers]
            if grad:
                return kv
            self._kv = kv
        return self._kv

    @staticmethod
    def cache(model: Any, kv: list[tuple[torch.Tensor, torch.Tensor]], batch: int) -> Any:
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
        for index, (keys, values) in enumerate(kv):
            cache.update(keys.expand(batch, -1, -1, -1), values.expand(batch, -1, -1, -1), index)
        return cache


def prompt_ids(tokenizer: Any, conversation: Sequence[dict[str, Any]], opening: str = "") -> list[int]:
    """The conversation in the chat template, the assistant's turn opened, then ``opening``'s tokens."""
    ids: list[int] = tokenizer.apply_chat_template(list(conversation), add_generation_prompt=True, tokenize=True,
                                                   return_dict=True)["input_ids"]
    return ids + (tokenizer.encode(opening, add_special_tokens=False) if opening else [])


@torch.no_grad()
def generate(model: Any, tokenizer: Any, prefix: SharedPrefix, conversations: Sequence[Sequence[dict[str, Any]]],
             cfg: Config, temperature: float) -> list[tuple[list[int], list[int], str]]:
    """One reply per conversation, in one batch: ``(prompt ids after the prefix, reply ids, reply text)``."""
    rows = [prompt_ids(tokenizer, c, cfg.reply_opening) for c in conversations]
    prefix.fit(rows)
    assert prefix.ids is not None
    p = len(prefix.ids)
    suffixes = [r[p:] for r in rows]
    width = max(len(s) for s in suffixes)
    pad = tokenizer.pad_token_id
    input_ids = torch.tensor([prefix.ids + [pad] * (width - len(s)) + s for s in suffixes])
    mask = torch.tensor([[1] * p + [0] * (width - len(s)) + [1] * len(s) for s in suffixes])
    cache = prefix.cache(model, prefix.layers(model), len(rows))
    sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0, "top_k": 0} if temperature > 0 \
        else {"do_sample": False}
    out = model.generate(input_ids=input_ids, attention_mask=mask, cache=cache, **sampling,
                         max_new_tokens=cfg.max_new_tokens, pad_token_id=pad, eos_token_id=tokenizer.eos_token_id)
    replies = []
    for suffix, generated in zip(suffixes, out[:, input_ids.shape[1]:].tolist(), strict=True):
        if tokenizer.eos_token_id in generated:  # keep the end-of-turn token: stopping is learned too
            generated = generated[:generated.index(tokenizer.eos_token_id) + 1]
        replies.append((suffix, generated, cfg.reply_opening + tokenizer.decode(generated, skip_special_tokens=True)))
    return replies


def make_env(tasks: Sequence[Any] | None, cfg: Config, split: str | None = None,
             training: bool = False) -> gym.Env[Any, str]:
    """One copy: DB-v0 on sqlite, shaped reward, chat messages. For evaluation the first invalid
    reply ends the episode (IF/IA); for training, ``cfg.train_invalid_action`` and ``cfg.max_turns``."""
    options: dict[str, Any] = {"tasks": list(tasks)} if tasks is not None else {"split": split}
    if training:
        options.update(invalid_action=cfg.train_invalid_action, max_episode_steps=cfg.max_turns)
    else:
        options.update(invalid_action="terminate", max_episode_steps=cfg.eval_max_turns)
    env = gym.make(ENV_ID, backend="sqlite", **options)
    return ChatMessages(ShapeReward(env, format_penalty(cfg.format_penalty, partial_credit)), style="react")


def rollout(envs: SyncVectorEnv, model: Any, tokenizer: Any, prefix: SharedPrefix, task_ids: Sequence[str],
            cfg: Config, temperature: float, seed: int) -> list[Episode]:
    """Play one episode of ``task_ids[i]`` on copy ``i`` of ``envs``, the model replying for all running copies."""
    n = len(task_ids)
    conversations: list[Any] = [None] * n
    for i, task_id in enumerate(task_ids):  # each copy on its task (gymnasium's reset_mask)
        observations, _ = envs.reset(seed=seed + i, options={"task_id": task_id, "reset_mask": np.arange(n) == i})
        conversations[i] = observations[i]
    episodes = [Episode(task_id) for task_id in task_ids]
    running = np.ones(n, dtype=bool)
    turn = 0
    while running.any():
        active = np.flatnonzero(running)
        torch.manual_seed(seed * 1000 + turn)  # the same draws for the same batch, before and after training
        replies = generate(model, tokenizer, prefix, [conversations[i] for i in active], cfg, temperature)
        actions = [""] * n  # a copy whose episode ended has moved on (autoreset): its reply is ignored
        for i, (suffix, completion, text) in zip(active, replies, strict=True):
            episodes[i].turns.append((suffix, completion))
            episodes[i].replies.append(text)
            actions[i] = text
        observations, rewards, terminated, truncated, infos = envs.step(tuple(actions))
        for i in active:
            episodes[i].reward += float(rewards[i])
            # A batched key is there only when some copy has it: no copy's reply was invalid, no "_reason".
            episodes[i].invalid_replies += int(infos["action_error"].get("_reason", np.zeros(n, bool))[i])
            conversations[i] = observations[i]
            if terminated[i] or truncated[i]:
                running[i] = False
                episodes[i].finish_reason = str(getattr(infos["finish_reason"][i], "value", infos["finish_reason"][i]))
                episodes[i].env_reward = float(infos["score"]["reward"][i])
                episodes[i].success = bool(infos["score"]["success"][i])
        turn += 1
    return episodes


def advantages(rewards: Sequence[float], group_size: int) -> np.ndarray:
    """GRPO's advantage: each return minus its group's mean, over the group's standard deviation
    (0 for a group whose returns are all equal: it carries no signal)."""
    r = np.asarray(rewards, dtype=float).reshape(-1, group_size)
    std = r.std(axis=1, keepdims=True)
    a = np.where(std > 0, (r - r.mean(axis=1, keepdims=True)) / np.where(std > 0, std, 1.0), 0.0)
    return a.ravel()


def reply_logprobs(model: Any, kv: list[tuple[torch.Tensor, torch.Tensor]], prefix_length: int,
                   samples: Sequence[tuple[list[int], list[int]]]) -> list[torch.Tensor]:
    """Per sample ``(prompt ids after the prefix, reply ids)``, the log-probability of each reply token
    under the model, in one right-padded batch over the prefix's keys and values ``kv``."""
    rows = [s + c for s, c in samples]
    width = max(len(r) for r in rows)
    ids = torch.tensor([r + [0] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1] * (prefix_length + len(r)) + [0] * (width - len(r)) for r in rows])
    positions = torch.arange(prefix_length, prefix_length + width).expand(len(rows), -1)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions,
                   cache=SharedPrefix.cache(model, kv, len(rows)), use_cache=True).logits
    out = []
    for j, (s, c) in enumerate(samples):
        logp = torch.log_softmax(logits[j, len(s) - 1:len(s) + len(c) - 1].float(), dim=-1)
        out.append(logp.gather(1, torch.tensor(c)[:, None]).squeeze(1))
    return out


def policy_gradient_step(model: Any, optimizer: torch.optim.Optimizer, prefix: SharedPrefix,
                         episodes: Sequence[Episode], adv: np.ndarray, cfg: Config) -> float:
    """One update: minimise ``-sum(A * log p(token)) / tokens`` over every reply token of every
    episode with a non-zero advantage (the token-level loss; ratio 1 on fresh rollouts).

    The prefix's keys and values go through the graph once: the micro-batches accumulate their
    gradient on a detached copy, and one backward pass carries it into the prefix.
    """
    samples = [(s, c, float(a)) for e, a in zip(episodes, adv, strict=True) if a != 0 for s, c in e.turns if c]
    if not samples:
        return 0.0
    tokens = sum(len(c) for _, c, _ in samples)
    model.train()
    optimizer.zero_grad()
    if not cfg.prompt_grad:
        total = 0.0
        for s, c, a in samples:
            loss = -a * reply_only_logprobs(model, prefix, s, c).sum() / tokens
            loss.backward()
            total += float(loss.detach())
        return _apply(model, optimizer, prefix, total)
    kv = prefix.layers(model, grad=True)
    leaves = [(k.detach().requires_grad_(), v.detach().requires_grad_()) for k, v in kv]
    total = 0.0
    for start in range(0, len(samples), cfg.micro_batch):
        chunk = samples[start:start + cfg.micro_batch]
        logps = reply_logprobs(model, leaves, len(prefix.ids or []), [(s, c) for s, c, _ in chunk])
        loss = -sum(a * logp.sum() for (_, _, a), logp in zip(chunk, logps, strict=True)) / tokens
        loss.backward()
        total += float(loss.detach())
    torch.autograd.backward([t for pair in kv for t in pair], [t.grad for pair in leaves for t in pair])
    return _apply(model, optimizer, prefix, total)


def _apply(model: Any, optimizer: torch.optim.Optimizer, prefix: SharedPrefix, loss: float) -> float:
    torch.nn.utils.clip_grad_norm_([q for q in model.parameters() if q.requires_grad], 1.0)
    optimizer.step()
    prefix.invalidate()
    model.eval()
    return loss


def reply_only_logprobs(model: Any, prefix: SharedPrefix, suffix: list[int], completion: list[int]) -> torch.Tensor:
    """Log-probabilities of ``completion``'s tokens with the gradient through the reply only: the
    prompt (prefix and ``suffix`` but its last token) runs without gradient into the cache."""
    cache = SharedPrefix.cache(model, prefix.layers(model), 1)
    if len(suffix) > 1:
        with torch.no_grad():
            model(input_ids=torch.tensor([suffix[:-1]]), cache=cache, use_cache=True)
    logits = model(input_ids=torch.tensor([suffix[-1:] + completion[:-1]]), cache=cache, use_cache=True).logits
    return torch.log_softmax(logits[0].float(), dim=-1).gather(1, torch.tensor(completion)[:, None]).squeeze(1)


def train_step(envs: SyncVectorEnv, model: Any, tokenizer: Any, prefix: SharedPrefix,
               optimizer: torch.optim.Optimizer, task_ids: Sequence[str], cfg: Config,
               seed: int) -> tuple[list[Episode], np.ndarray, float]:
    """One GRPO step: a group of ``cfg.group_size`` episodes per task (``task_ids`` lists each task once
    per episode, groups contiguous), the advantages from the env's returns, one update."""
    episodes = rollout(envs, model, tokenizer, prefix, task_ids, cfg, cfg.temperature, seed)
    adv = advantages([e.reward for e in episodes], cfg.group_size)
    return episodes, adv, policy_gradient_step(model, optimizer, prefix, episodes, adv, cfg)


def make_optimizer(model: Any, cfg: Config) -> torch.optim.Optimizer:
    return torch.optim.AdamW([q for q in model.parameters() if q.requires_grad], lr=cfg.learning_rate,
                             weight_decay=0.0)


def train_tasks(cfg: Config) -> list[Any]:
    pool = get_domain("db").generate_tasks(cfg.train_pool, seed=cfg.seed, split="train")
    return [t for t in pool if t.template in TRAIN_FAMILIES]


def train(model: Any, tokenizer: Any, prefix: SharedPrefix, cfg: Config, log: Any = None) -> list[dict[str, Any]]:
    """Run GRPO until ``max_steps`` or ``max_train_minutes``; return one record per step."""
    tasks = train_tasks(cfg)
    rng = random.Random(cfg.seed)
    order = rng.sample(tasks, len(tasks))
    size = cfg.groups_per_step * cfg.group_size
    envs = SyncVectorEnv([lambda: make_env(tasks, cfg, training=True) for _ in range(size)])
    optimizer = make_optimizer(model, cfg)
    history: list[dict[str, Any]] = []
    started = time.perf_counter()
    try:
        for step in range(cfg.max_steps):
            if time.perf_counter() - started > cfg.max_train_minutes * 60:
                break
            picked = [order[(step * cfg.groups_per_step + g) % len(order)].id for g in range(cfg.groups_per_step)]
            ids = [t for t in picked for _ in range(cfg.group_size)]
            t0 = time.perf_counter()
            episodes, _, loss = train_step(envs, model, tokenizer, prefix, optimizer, ids, cfg, seed=10_000 + step)
            record = {"step": step + 1, "reward": float(np.mean([e.reward for e in episodes])),
                      "valid_action_rate": float(np.mean([e.invalid_replies == 0 for e in episodes])),
                      "valid_reply_rate": 1 - sum(e.invalid_replies for e in episodes) / sum(
                          len(e.turns) for e in episodes),
                      "success_rate": float(np.mean([e.success for e in episodes])), "loss": loss,
                      "reply_tokens": sum(len(c) for e in episodes for _, c in e.turns),
                      "step_s": round(time.perf_counter() - t0, 1),
                      "elapsed_s": round(time.perf_counter() - started, 1)}
            history.append(record)
            if log:
                print(json.dumps(record), file=log, flush=True)
    finally:
        envs.close()
    return history


def evaluate(model: Any, tokenizer: Any, prefix: SharedPrefix, tasks: Sequence[Any] | None, split: str | None,
             task_ids: Sequence[str], cfg: Config, shard: tuple[int, int] = (0, 1), first: int = 0) -> list[Episode]:
    """Play one episode per entry of ``task_ids`` (repeats allowed) at the eval temperature, seeded per batch.

    ``shard`` ``(j, k)``: only the batches whose index (counted from ``first``, the batches of the
    sets before this one) is ``j`` modulo ``k``: the same batches and seeds as an unsharded run, so
    ``k`` processes share one evaluation.
    """
    model.eval()
    out: list[Episode] = []
    envs = SyncVectorEnv([lambda: make_env(tasks, cfg, split) for _ in range(cfg.eval_batch)])
    try:
        for start in range(0, len(task_ids), cfg.eval_batch):
            if (first + start // cfg.eval_batch) % shard[1] != shard[0]:
                continue
            chunk = list(task_ids[start:start + cfg.eval_batch])
            if len(chunk) < cfg.eval_batch:
                envs.close()
                envs = SyncVectorEnv([lambda: make_env(tasks, cfg, split) for _ in range(len(chunk))])
            out += rollout(envs, model, tokenizer, prefix, chunk, cfg, cfg.eval_temperature, seed=start)
            print(f"  evaluated {len(out)}/{len(task_ids)}", file=sys.stderr, flush=True)
    finally:
        envs.close()
    return out


def eval_sets(cfg: Config) -> dict[str, tuple[list[Any] | None, str | None, list[str]]]:
    """The two test sets: DB-v0's bundled test split (each task repeated) and generated test-split questions."""
    bundled = gym.make(ENV_ID, backend="sqlite", split="test")
    bundled_ids = [t.id for t in bundled.unwrapped.tasks]  # type: ignore[attr-defined]
    bundled.close()
    generated = [t for t in get_domain("db").generate_tasks(3000, seed=cfg.seed, split="test")
                 if t.answer is not None][:cfg.eval_generated]
    return {"bundled_test": (None, "test", [i for i in bundled_ids for _ in range(cfg.eval_repeats_bundled)]),
            "generated_test": (generated, None, [t.id for t in generated])}


def episode_rows(episodes: Sequence[Episode]) -> list[dict[str, Any]]:
    return [{"task_id": e.task_id, "reward": e.reward, "env_reward": e.env_reward, "success": e.success,
             "finish_reason": e.finish_reason, "turns": len(e.turns), "invalid_replies": e.invalid_replies,
             "replies": e.replies} for e in episodes]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gguf", type=Path, required=True, help="SmolLM2-135M-Instruct's GGUF file")
    parser.add_argument("--converted", type=Path, default=None,
                        help="a folder to keep the dequantised model in (made on the first run)")
    parser.add_argument("--output", type=Path, required=True, help="where the raw results (JSON) go")
    parser.add_argument("--log", type=Path, default=None, help="per-step records (JSON Lines)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch's CPU threads (default 1: on a loaded machine two threads' OpenMP barriers "
                             "made a decoding step 12 times slower)")
    parser.add_argument("--phases", default="before,train,after",
                        help="what to run: before (evaluate the base model), train, after (evaluate the result)")
    parser.add_argument("--before-from", type=Path, default=None,
                        help="take the before evaluation from this earlier raw output (same config) instead")
    parser.add_argument("--sets", default="bundled_test,generated_test", help="the evaluation sets to play")
    parser.add_argument("--shard", default="0/1", help="J/K: play the evaluation batches numbered J modulo K")
    parser.add_argument("--save-adapter", type=Path, default=None, help="write the trained LoRA weights here")
    parser.add_argument("--adapter", type=Path, default=None,
                        help="start from these LoRA weights (e.g. evaluate a trained policy with --phases after)")
    for name, value in asdict(Config()).items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    cfg = Config(**{k: getattr(args, k) for k in asdict(Config())})
    phases = set(args.phases.split(","))
    shard = (int(args.shard.split("/")[0]), int(args.shard.split("/")[1]))
    torch.manual_seed(cfg.seed)
    torch.set_num_threads(args.threads)
    started = time.perf_counter()
    model, tokenizer = load_policy(args.gguf, cfg.lora_rank, args.converted, args.adapter)
    model.eval()
    prefix = SharedPrefix()
    wanted = args.sets.split(",")
    sets = {k: v for k, v in eval_sets(cfg).items() if k in wanted} if phases & {"before", "after"} else {}
    first, count = {}, 0  # each set's first batch number, for --shard
    for name, (_, _, ids) in sets.items():
        first[name], count = count, count + -(-len(ids) // cfg.eval_batch)
    result: dict[str, Any] = {"config": asdict(cfg), "train_families": list(TRAIN_FAMILIES),
                              "load_s": round(time.perf_counter() - started, 1), "before": {}, "after": {}}
    if args.before_from:
        earlier = json.loads(args.before_from.read_text(encoding="utf-8"))
        differ = [k for k in EVAL_FIELDS if earlier["config"][k] != result["config"][k]]
        if differ:
            raise SystemExit(f"{args.before_from} was evaluated with other settings: {', '.join(differ)}")
        result["before"] = earlier["before"]
        result.update({k: v for k, v in earlier.items() if k.startswith("before_")})
    log = args.log.open("a", encoding="utf-8") if args.log else None
    try:
        def evaluate_sets(side: str) -> None:  # "before" or "after" training, every evaluation set
            for name, (tasks, split, ids) in sets.items():
                t0 = time.perf_counter()
                result[side][name] = episode_rows(evaluate(model, tokenizer, prefix, tasks, split, ids, cfg, shard,
                                                           first[name]))
                result[f"{side}_{name}_s"] = round(time.perf_counter() - t0, 1)
                print(f"{side} {name}: {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)

        if "before" in phases:
            evaluate_sets("before")
        if "train" in phases:
            t0 = time.perf_counter()
            result["history"] = train(model, tokenizer, prefix, cfg, log)
            result["train_s"] = round(time.perf_counter() - t0, 1)
            if args.save_adapter:
                model.save_pretrained(args.save_adapter)
        if "after" in phases:
            evaluate_sets("after")
    finally:
        if log:
            log.close()
    result["total_s"] = round(time.perf_counter() - started, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, default=str), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
