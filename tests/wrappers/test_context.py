from __future__ import annotations

import builtins
from pathlib import Path
from typing import Any

import pytest

from agentunit_gym.core import FinishReason
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError, MissingDependencyError
from agentunit_gym.wrappers import (
    ApproxTokenCounter,
    LimitContext,
    TokenCounter,
    TokenizersCounter,
    make_token_counter,
)

from ..core.toy import ToyEnv


class CharCounter:
    """One token per character: makes the arithmetic of the tests obvious."""

    name = "chars"

    def count(self, text: str) -> int:
        return len(text)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("", 0),
        ("word", 1),
        ("words", 2),  # 5 letters: ceil(5 / 4)
        ("ls -la /tmp", 5),  # ls, space, -, la, space, /, tmp -> 1+0+1+1+0+1+1
        ("123456", 2),  # digits: one token per 3
        ("a\nb", 3),
        ("中文", 4),  # 3 UTF-8 bytes a character: 2 tokens each
        ("\x00\x01", 2),
    ],
)
def test_approx_counter_rules(text: str, tokens: int) -> None:
    assert ApproxTokenCounter().count(text) == tokens


def test_approx_counter_is_linear_and_handles_megabytes() -> None:
    counter = ApproxTokenCounter()
    one = counter.count("SELECT name FROM cities WHERE population > 100;\n")
    assert counter.count("SELECT name FROM cities WHERE population > 100;\n" * 1000) == 1000 * one
    assert counter.count("x" * 1_000_000) == 250_000


def _train_tokenizer(path: Path) -> Path:
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import models, pre_tokenizers, trainers

    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(["select name from cities", "ls -la /tmp"],
                            trainers.WordLevelTrainer(special_tokens=["[UNK]"]))
    file = path / "tokenizer.json"
    tok.save(str(file))
    return file


def test_tokenizers_counter_counts_with_the_users_file(tmp_path: Path) -> None:
    file = _train_tokenizer(tmp_path)
    counter = make_token_counter(f"tokenizers:{file}")
    assert isinstance(counter, TokenizersCounter) and isinstance(counter, TokenCounter)
    assert counter.name == "tokenizers:tokenizer.json"
    # Whitespace pre-tokenizer: select | name | from | cities; unknown words become [UNK], still one token each.
    assert counter.count("select name from cities") == 4
    assert counter.count("select zebra") == 2
    assert make_token_counter(str(file)).count("ls") == 1


def test_tokenizers_counter_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        TokenizersCounter(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(ConfigError, match="not a tokenizers JSON"):
        TokenizersCounter(bad)
    real_import = builtins.__import__

    def no_tokenizers(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "tokenizers":
            raise ImportError("no tokenizers")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tokenizers)
    with pytest.raises(MissingDependencyError, match=r'pip install "agentunit-gym\[tokens\]"'):
        TokenizersCounter(bad)


def test_tiktoken_counter_missing_or_offline() -> None:
    try:
        import tiktoken  # noqa: F401
    except ImportError:
        with pytest.raises(MissingDependencyError, match="tiktoken"):
            make_token_counter("tiktoken")
    else:  # installed: either its data loads, or the error says how to provide it
        try:
            counter = make_token_counter("tiktoken:cl100k_base")
        except ConfigError as exc:
            assert "TIKTOKEN_CACHE_DIR" in str(exc)
        else:
            assert counter.count("hello world") == 2


def test_unknown_counter_spec() -> None:
    with pytest.raises(ConfigError, match="unknown token counter"):
        make_token_counter("gpt-9")
    with pytest.raises(ConfigError):
        make_token_counter(42)  # type: ignore[arg-type]


def test_context_counts_prompt_actions_observations_and_ends_with_cle() -> None:
    # Prompt "Task: Say 42." = 13 chars + overhead 1 = 14.
    env = LimitContext(ToyEnv(max_steps=10), max_tokens=60, counter=CharCounter(), message_overhead=1)
    _, info = env.reset(options={"task_id": "t1"})
    assert info["context_tokens"] == 14 and info["context_counter"] == "chars"
    # Reply "Act: echo(aaaa)" (15+1) and observation "aaaa" (4+1): 14 + 16 + 5 = 35.
    _, _, term, trunc, info = env.step("Act: echo(aaaa)")
    assert (term, trunc, info["context_tokens"]) == (False, False, 35)
    # Reply of 31+1 brings it to 67 already; with its 20+1 observation it would be 88 > 60.
    obs, reward, term, trunc, info = env.step("Act: echo(" + "b" * 20 + ")")
    assert obs == "b" * 20
    assert (reward, term, trunc) == (0.0, False, True)
    assert info["finish_reason"] is FinishReason.CONTEXT_LIMIT
    assert "88 tokens, over 60" in info["finish_detail"]
    assert info["context_tokens"] == 67
    assert Flag.CONTEXT_LIMIT in info["flags"]


def test_context_does_not_override_a_commit() -> None:
    env = LimitContext(ToyEnv(), max_tokens=20, counter=CharCounter(), message_overhead=0)
    env.reset(options={"task_id": "t2"})
    _, reward, term, trunc, info = env.step("Act: answer(7)")  # 14 + 15 = 29 > 20, but it committed
    assert (reward, term, trunc) == (1.0, True, False) and info["finish_reason"] is FinishReason.COMPLETE


def test_prompt_that_overflows_ends_at_the_first_step_without_running() -> None:
    env = LimitContext(ToyEnv(), max_tokens=5, counter=CharCounter())
    obs0, info = env.reset(options={"task_id": "t1"})
    assert info["context_tokens"] > 5
    obs, _, term, trunc, info = env.step("Act: answer(42)")
    assert obs == obs0 and (term, trunc) == (False, True)
    assert info["finish_reason"] is FinishReason.CONTEXT_LIMIT and info["reply_class"] == "skipped"
    assert env.unwrapped.steps == 0


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="max_tokens must be"):
        LimitContext(ToyEnv(), max_tokens=0)
    with pytest.raises(ConfigError, match="message_overhead must be"):
        LimitContext(ToyEnv(), max_tokens=10, message_overhead=-1)


def _first_observation(task: Any, first_observation: str) -> tuple[str, ...]:
    return (first_observation,)


def test_the_opening_turns_of_a_scripted_conversation_count() -> None:
    # --protocol agentbench: the agent reads the instructions, the acknowledgement and the
    # one-shot (info["chat_head"]) before the task turn; all of them fill its context.
    from agentunit_gym.core.conversation import ScriptedConversation
    from agentunit_gym.tasks.agentbench_checkout import Slot, Template
    from agentunit_gym.wrappers.conversation import StartConversation

    head = (("user", "I" * 30), ("assistant", "ok"), ("user", "shot question"), ("assistant", "shot reply"))
    conversation = ScriptedConversation(head, Template(("Q: ", Slot(0))), _first_observation, "test")
    env = LimitContext(StartConversation(ToyEnv(max_steps=10), conversation), max_tokens=80, counter=CharCounter(),
                       message_overhead=1)
    obs, info = env.reset(options={"task_id": "t1"})
    assert obs == "Q: Task: Say 42."
    # Head 31 + 3 + 14 + 11 = 59, the task turn 16 + 1: 76.
    assert info["context_tokens"] == 76
    # Reply "Act: echo(a)" (12+1) alone brings it to 89 > 80: its observation cannot be read.
    _, _, term, trunc, info = env.step("Act: echo(a)")
    assert (term, trunc) == (False, True) and info["finish_reason"] is FinishReason.CONTEXT_LIMIT
    # A head that alone overflows ends the episode at the first step, the reply not run.
    env = LimitContext(StartConversation(ToyEnv(), conversation), max_tokens=60, counter=CharCounter(),
                       message_overhead=1)
    env.reset(options={"task_id": "t1"})
    _, _, term, trunc, info = env.step("Act: answer(42)")
    assert (term, trunc) == (False, True) and info["reply_class"] == "skipped"
    assert "the opening turns and the task turn take 76 tokens" in info["finish_detail"]
