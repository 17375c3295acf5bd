"""How to reach a model and how to prompt it: :class:`OpenAIConfig`, its defaults, the
``--model-arg`` parser and the price table (USD per million tokens) that turns usage into cost.

Example:

    >>> config = OpenAIConfig(model="gpt-4o-mini", temperature=0.2,
    ...                       extra_body=parse_model_args(["seed=7", "logprobs=true", "tag=v1"]))
    >>> config.extra_body       # each value read as JSON when it parses, else kept as text
    {'seed': 7, 'logprobs': True, 'tag': 'v1'}
    >>> local = OpenAIConfig(model="m", base_url="http://127.0.0.1:8000/v1", api_key_env="AGENTUNIT_NO_SUCH_KEY")
    >>> local.api_key() is None  # from $api_key_env; None for a loopback endpoint without one
    True
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentunit_gym.errors import ConfigError

LOOPBACK_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

DEFAULT_PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "o3-mini": (1.10, 4.40),
}
"""USD per million (input, output) tokens, for models whose list price was public when written.

Extend it with ``OpenAIConfig(prices=...)`` or ``--prices FILE`` (a JSON object
``{"model": [input_per_million, output_per_million]}``). A model missing from the table
gets no cost (unknown, not zero)."""


def load_price_table(path: str | Path) -> dict[str, tuple[float, float]]:
    """Read a JSON price table ``{"model": [input_per_million, output_per_million]}``.

    Raises:
        ConfigError: the file is missing or not in that shape.
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        return {str(k): (float(v[0]), float(v[1])) for k, v in data.items()}
    except (OSError, ValueError, TypeError, IndexError, AttributeError) as exc:
        raise ConfigError(
            f"price table {path}: expected a JSON object "
            f"{{\"model\": [input_per_million, output_per_million]}} ({exc})."
        ) from exc


DEFAULT_REQUEST_TIMEOUT_S = 300.0
"""One request's deadline: long enough for a full reply of a small model on a CPU (llama.cpp
serves ~5-20 tokens a second there), so a slow server is not abandoned and asked again
while it is still generating."""

DEFAULT_TURN_DEADLINE_S = 900.0
"""One turn's deadline, every retry included: three slow requests."""


def parse_model_args(items: Sequence[str]) -> dict[str, Any]:
    """``--model-arg KEY=VALUE`` options as request body fields; a value is read as JSON when it
    parses (``seed=7``, ``stop=["\\n"]``, ``logprobs=true``), else kept as a string.

    Raises:
        ConfigError: an item without ``=`` or with an empty key.
    """
    fields: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--model-arg expects KEY=VALUE (the value JSON or text, e.g. seed=7), got {item!r}.")
        try:
            fields[key.strip()] = json.loads(raw)
        except ValueError:
            fields[key.strip()] = raw
    return fields


_NAMED_FIELDS = frozenset({"model", "messages", "temperature", "top_p", "max_tokens", "tools", "stream"})
"""Request fields the config sets itself; ``extra_body`` may not repeat them."""


@dataclass(frozen=True)
class OpenAIConfig:
    """How to reach the model and how to prompt it.

    Attributes:
        model: the model name the endpoint knows.
        base_url: the endpoint up to ``/v1`` (``.../chat/completions`` is appended).
        api_key_env: the environment variable holding the key; a missing variable is an
            error unless the endpoint is on loopback (local servers rarely need a key).
        mode: ``react`` (text in the env's grammar) or ``tools`` (native tool calling).
        temperature: sampling temperature (``--temperature``).
        top_p: nucleus sampling mass (``--top-p``); None leaves the server's default.
        max_tokens: completion cap per turn (``--max-tokens``); a reply cut there has the
            finish reason ``length`` and is recorded as a truncated reply, not a format error.
        request_timeout_s: deadline of one HTTP request (``--request-timeout``). After it the
            client gives up and retries, but a server without cancellation (llama.cpp's, most
            local servers) may still be generating the abandoned reply, so the retry queues
            behind it: on a slow local server set it above the time one full reply takes.
        turn_deadline_s: deadline of one turn including every retry (``--turn-deadline``).
        extra_body: more request body fields (``--model-arg KEY=VALUE``: ``seed``,
            ``repeat_penalty``, ``stop`` ...), sent as given; the named settings above win.
        max_retries: retries after the first attempt on 429, 5xx and connection errors.
        backoff_s: the first backoff; doubled each retry, with jitter, capped at 30 s.
        prices: extra price table entries (USD per million input, output tokens).
        max_rps: requests per second to this endpoint at most, over every episode of the
            process (``--max-rps``); None for no limit.
    """

    model: str
    base_url: str = "https://api.openai.com/v1"
    api_key_env: str = "OPENAI_API_KEY"
    mode: Literal["react", "tools"] = "react"
    temperature: float = 0.0
    top_p: float | None = None
    max_tokens: int = 512
    request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S
    turn_deadline_s: float = DEFAULT_TURN_DEADLINE_S
    max_retries: int = 5
    backoff_s: float = 1.0
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    max_rps: float | None = None
    extra_body: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.max_rps is not None and self.max_rps <= 0:
            raise ConfigError(f"max_rps must be positive, got {self.max_rps!r}.")
        if self.max_tokens <= 0:
            raise ConfigError(f"max_tokens must be a positive number of tokens, got {self.max_tokens!r}.")
        if self.top_p is not None and not 0 < self.top_p <= 1:
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}.")
        named = sorted(set(self.extra_body) & _NAMED_FIELDS)
        if named:
            raise ConfigError(f"--model-arg {', '.join(named)}: set by its own option (--temperature, --top-p, "
                              "--max-tokens, the agent's model and mode); give it there instead.")
        if self.request_timeout_s <= 0 or self.turn_deadline_s <= 0:
            raise ConfigError(f"request_timeout_s and turn_deadline_s must be positive seconds, got "
                              f"{self.request_timeout_s!r} and {self.turn_deadline_s!r}.")

    def api_key(self) -> str | None:
        """The key from the environment.

        Raises:
            ConfigError: the variable is not set and the endpoint is not on loopback.
        """
        key = os.environ.get(self.api_key_env)
        if key:
            return key
        host = urllib.parse.urlparse(self.base_url).hostname or ""
        if host in LOOPBACK_HOSTS:
            return None
        raise ConfigError(
            f"no API key: set the environment variable {self.api_key_env} (or name another one with "
            "--api-key-env), or point --base-url at a local server."
        )

    def price(self) -> tuple[float, float] | None:
        table = {**DEFAULT_PRICES, **self.prices}
        return table.get(self.model)


__all__ = ["DEFAULT_PRICES", "DEFAULT_REQUEST_TIMEOUT_S", "DEFAULT_TURN_DEADLINE_S", "LOOPBACK_HOSTS", "OpenAIConfig",
           "load_price_table", "parse_model_args"]
