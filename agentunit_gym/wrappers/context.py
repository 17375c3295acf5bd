"""The agent's context window: count the whole conversation's tokens, end with ``CONTEXT_LIMIT`` (CLE).

Token counting is pluggable through the :class:`TokenCounter` protocol (one method,
``count(text) -> int``). Three counters ship:

- :class:`ApproxTokenCounter` (the default): no download, no dependency. A regex-based
  estimate: a run of ASCII letters costs one token per 4 characters (rounded up, the
  usual English average of BPE vocabularies), a run of digits one per 3, every
  punctuation, symbol or control character one, every newline one and each further 4
  characters of a whitespace run one, and a non-ASCII character one token per 2 bytes of
  its UTF-8 form. The rules lean towards counting high (symbols and non-Latin text cost
  more in most vocabularies than in English prose) so a run ends a little early rather
  than overflowing the real model; its error against a given model's tokenizer has not
  been measured here, so use a real tokenizer when the exact limit matters.
- :class:`TokenizersCounter`: exact counts from a Hugging Face ``tokenizer.json`` file the
  user supplies (the ``tokenizers`` package is imported only when used).
- :class:`TiktokenCounter`: OpenAI's encodings through ``tiktoken``, when it is installed
  and its encoding data is available (cached or downloadable).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol, SupportsFloat, runtime_checkable

import gymnasium as gym

from agentunit_gym.core.finish import FinishReason
from agentunit_gym.core.trace import Flag
from agentunit_gym.errors import ConfigError, MissingDependencyError
from agentunit_gym.wrappers.base import EpisodeWrapper, Layer
from agentunit_gym.wrappers.conversation import CHAT_HEAD_KEY
from agentunit_gym.wrappers.info import add_flags, agent_env, reset_info, skipped_step_info, step_info
from agentunit_gym.wrappers.keys import WrappedResetInfo, WrappedStepInfo


@runtime_checkable
class TokenCounter(Protocol):
    """Counts the tokens of a text for one model's tokenizer."""

    name: str
    """Names the counter in ``info`` and traces (``approx``, ``tiktoken:cl100k_base`` ...)."""

    def count(self, text: str) -> int:
        """The number of tokens of ``text``."""
        ...


# One pattern per rule of the estimate; counting matches in C is several times faster than
# walking every piece of the text in Python (the prompt is counted at every reset).
_LETTERS = re.compile(r"[A-Za-z]+")
_DIGITS = re.compile(r"[0-9]+")
_SINGLES = re.compile(r"[\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e\x00-\x08\x0e-\x1b\x7f]")
_SPACE_RUNS = re.compile(r"\s{5,}")
_NARROW = re.compile(r"(?!\s)[\u0080-\u07ff]")  # two UTF-8 bytes: one token
_WIDE = re.compile(r"[\u0800-\U0010ffff]")  # three or four bytes: two tokens


class ApproxTokenCounter:
    """A dependency-free token estimate (see the module docstring for the rules)."""

    name = "approx"

    def count(self, text: str) -> int:
        tokens: int = sum((len(run) + 3) // 4 for run in _LETTERS.findall(text))
        tokens += sum((len(run) + 2) // 3 for run in _DIGITS.findall(text))
        tokens += len(_SINGLES.findall(text))
        tokens += text.count("\n")
        # Past the first, each 4 whitespace characters of a run cost a token (newlines are counted above);
        # runs shorter than 5 cost nothing, so only those are looked at.
        tokens += sum(max(0, len(run) - run.count("\n") - 1) // 4 for run in _SPACE_RUNS.findall(text))
        tokens += len(_NARROW.findall(text))
        tokens += 2 * sum(1 for ch in _WIDE.findall(text) if not ch.isspace())
        return tokens


class TokenizersCounter:
    """Exact counts from a Hugging Face ``tokenizer.json`` (the ``tokenizers`` package).

    Args:
        path: the tokenizer file (as saved by ``Tokenizer.save`` / shipped with a model).

    Raises:
        MissingDependencyError: ``tokenizers`` is not installed.
        ConfigError: the file does not exist or is not a tokenizer.
    """

    def __init__(self, path: str | Path) -> None:
        try:
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise MissingDependencyError("tokenizers", "tokens", "Counting tokens with a tokenizer.json") from exc
        file = Path(path)
        if not file.is_file():
            raise ConfigError(f"tokenizer file {str(file)!r} does not exist; pass the path of a tokenizer.json.")
        try:
            self._tokenizer = Tokenizer.from_file(str(file))
        except Exception as exc:  # noqa: BLE001 - the Rust binding raises a bare Exception on bad files
            raise ConfigError(f"{str(file)!r} is not a tokenizers JSON file ({exc}).") from exc
        self.name = f"tokenizers:{file.name}"

    def count(self, text: str) -> int:
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)


class TiktokenCounter:
    """Counts with a ``tiktoken`` encoding.

    Args:
        encoding: the encoding name (``cl100k_base``, ``o200k_base`` ...).

    Raises:
        MissingDependencyError: ``tiktoken`` is not installed.
        ConfigError: the encoding's data cannot be loaded (offline with no cache: set
            ``TIKTOKEN_CACHE_DIR`` to a folder holding it, or use another counter).
    """

    def __init__(self, encoding: str = "cl100k_base") -> None:
        try:
            import tiktoken
        except ImportError as exc:
            raise MissingDependencyError("tiktoken", "tokens", "Counting tokens with tiktoken") from exc
        try:
            self._encoding = tiktoken.get_encoding(encoding)
        except (OSError, ValueError, KeyError) as exc:
            raise ConfigError(
                f"tiktoken cannot load the encoding {encoding!r} ({exc}). Offline, point TIKTOKEN_CACHE_DIR at a "
                "folder that holds its data, or use counter='approx' or a tokenizers JSON file."
            ) from exc
        self.name = f"tiktoken:{encoding}"

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))


def make_token_counter(spec: str | TokenCounter | None = None) -> TokenCounter:
    """Build a counter from a short spec.

    Args:
        spec: None or ``"approx"``; ``"tiktoken"`` or ``"tiktoken:<encoding>"``;
            ``"tokenizers:<path>"`` or a path ending in ``.json``; or a ready counter.

    Returns:
        The counter.

    Raises:
        ConfigError: an unknown spec. MissingDependencyError: the counter's package is absent.
    """
    if spec is None or spec == "approx":
        return ApproxTokenCounter()
    if not isinstance(spec, str):
        if isinstance(spec, TokenCounter):
            return spec
        raise ConfigError(f"a token counter needs a count(text) method and a name, got {type(spec).__name__}.")
    if spec == "tiktoken":
        return TiktokenCounter()
    if spec.startswith("tiktoken:"):
        return TiktokenCounter(spec.split(":", 1)[1])
    if spec.startswith("tokenizers:"):
        return TokenizersCounter(spec.split(":", 1)[1])
    if spec.endswith(".json"):
        return TokenizersCounter(spec)
    raise ConfigError(
        f"unknown token counter {spec!r}; use 'approx', 'tiktoken[:<encoding>]', 'tokenizers:<path>' or a path to a "
        "tokenizer.json."
    )


class LimitContext(EpisodeWrapper, gym.utils.RecordConstructorArgs):
    """End the episode with ``CONTEXT_LIMIT`` when the conversation would overflow the agent's context.

    The conversation is the prompt, every reply and every observation, each message costing
    ``message_overhead`` tokens more (chat formats wrap messages in role markers). Under a
    benchmark's opening (:class:`~agentunit_gym.wrappers.conversation.StartConversation`,
    ``--protocol agentbench`` with a checkout) the opening turns in ``info["chat_head"]``
    (instructions, acknowledgement, one-shot) count too, each a message, before the task turn. When the
    observation a step produced would push the total past ``max_tokens``, the episode ends
    (CLE, ``truncated=True``): the agent could not read it. ``info["context_tokens"]`` holds
    the running total (without the overflowing observation); ``info["context_counter"]``
    the counter's name. A prompt that alone overflows ends the episode at the first step,
    without running the reply; so do opening turns that overflow with it.

    Example (``counter="tokenizers:tok.json"`` counts with a model's own tokenizer):
        >>> import gymnasium as gym
        >>> env = LimitContext(gym.make("AgentUnit/DB-v0", backend="sqlite"), max_tokens=400, counter="approx")
        >>> obs, info = env.reset(options={"task_id": "db-weather-03"})
        >>> info["context_tokens"] < 400, info["context_counter"]
        (True, 'approx')
        >>> *_, truncated, info = env.step('{"name": "execute_sql", "arguments": {"query": "SELECT 1"}}' + " " * 4000)
        >>> truncated, info["finish_reason"].abbreviation
        (True, 'CLE')
        >>> env.close()

    Args:
        env: a stack over an AgentUnit env.
        max_tokens: the agent's context size in tokens.
        counter: a :class:`TokenCounter` or a spec for :func:`make_token_counter`.
        message_overhead: tokens added per message.

    Raises:
        ConfigError: ``max_tokens`` below 1, a negative overhead, or an unknown counter spec.
        MissingDependencyError: the counter needs a package that is not installed.
    """

    layer = Layer.CONTEXT

    def __init__(self, env: gym.Env[str, str], max_tokens: int, counter: str | TokenCounter | None = None,
                 message_overhead: int = 4) -> None:
        gym.utils.RecordConstructorArgs.__init__(self, max_tokens=max_tokens, counter=counter,
                                                 message_overhead=message_overhead)
        EpisodeWrapper.__init__(self, env)
        agent_env(env)
        if not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"max_tokens must be an integer of at least 1, got {max_tokens!r}.")
        if message_overhead < 0:
            raise ConfigError(f"message_overhead must be 0 or more, got {message_overhead!r}.")
        self.max_tokens = max_tokens
        self.counter = make_token_counter(counter)
        self.message_overhead = message_overhead
        self._tokens = 0
        self._prompt_overflows = False
        self._opening = False
        self._last_observation = ""

    @property
    def context_tokens(self) -> int:
        """Tokens of the conversation so far, as the agent has seen it."""
        return self._tokens

    def reset(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, WrappedResetInfo]:
        observation, raw = self.env.reset(seed=seed, options=options)
        info = reset_info(raw)
        head = raw.get(CHAT_HEAD_KEY) or ()
        self._opening = bool(head)
        self._tokens = sum(self._cost(str(message.get("content") or "")) for message in head) + self._cost(observation)
        self._prompt_overflows = self._tokens > self.max_tokens
        self._last_observation = observation
        info["context_tokens"] = self._tokens
        info["context_counter"] = self.counter.name
        info["max_context_tokens"] = self.max_tokens
        return observation, info

    def step(  # type: ignore[override]  # gymnasium types info as dict[str, Any]
        self, action: str
    ) -> tuple[str, SupportsFloat, bool, bool, WrappedStepInfo]:
        base = agent_env(self.env)
        if self._prompt_overflows and base.finish_reason is None and base.task is not None:
            task_id = base.task.id
            what = "the opening turns and the task turn take" if self._opening else "the prompt takes"
            skipped = skipped_step_info(base.steps, task_id, base.max_steps, "the prompt alone overflows the context",
                                        backend_limits_off=base.backend_limits_off)
            ended = self.end_episode_here(
                FinishReason.CONTEXT_LIMIT, f"{what} {self._tokens} tokens, more than the context of {self.max_tokens}",
                skipped)
            self._mark(skipped)
            return self._last_observation, ended or 0.0, False, True, skipped
        self._tokens += self._cost(action)
        observation, reward, terminated, truncated, raw = self.env.step(action)
        info = step_info(raw)
        if terminated or truncated:
            self._last_observation = observation
            return observation, reward, terminated, truncated, self.on_episode_end(info)
        total = self._tokens + self._cost(observation)
        if total > self.max_tokens:
            detail = f"the next observation would bring the context to {total} tokens, over {self.max_tokens}"
            ended = self.end_episode_here(FinishReason.CONTEXT_LIMIT, detail, info)
            if ended is not None:
                truncated, reward = True, ended
                self._mark(info)
        else:
            self._tokens = total
        info["context_tokens"] = self._tokens
        info["context_counter"] = self.counter.name
        self._last_observation = observation
        return observation, reward, terminated, truncated, info

    def on_episode_end(self, info: WrappedStepInfo) -> WrappedStepInfo:
        """Record the conversation's token count in the end ``info``. Called by ``step`` on the
        final step and by :func:`~agentunit_gym.wrappers.ending.end_episode`."""
        info["context_tokens"] = self._tokens
        info["context_counter"] = self.counter.name
        return info

    def _cost(self, text: str) -> int:
        return self.counter.count(str(text)) + self.message_overhead

    def _mark(self, info: WrappedStepInfo) -> None:
        info["context_tokens"] = self._tokens
        add_flags(info, Flag.CONTEXT_LIMIT)
