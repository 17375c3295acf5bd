"""A text space that accepts any Unicode string.

gymnasium's ``Text`` only contains strings drawn from its charset (alphanumerics by
default), which would reject most observations and agent replies. ``UnicodeText`` keeps
``Text`` as its base so that gymnasium's vector utilities (``batch_space``,
``concatenate``) handle it, and replaces membership and sampling.

Flattening (``gym.spaces.flatten`` and friends): a bounded space (``max_length`` set)
flattens to its Unicode code points, padded with -1 to ``max_length``, in a ``Box`` of
int32; ``unflatten`` gives the text back exactly. The envs' spaces are unbounded (an
observation has no fixed length), and flattening them raises a ``ConfigError`` that says so.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.error import CustomSpaceError
from gymnasium.spaces import Box, Sequence, Space, Text
from gymnasium.spaces.utils import flatdim, flatten, flatten_space, unflatten
from gymnasium.vector.utils import create_shared_memory

from agentunit_gym.errors import ConfigError

# Printable ASCII plus a few non-Latin, combining and astral characters: samples exercise
# Unicode handling without being unreadable.
_SAMPLE_ALPHABET = (
    "".join(chr(c) for c in range(0x20, 0x7F)) + "\n\téüßøñ中文字日本語한국어Ωπλж\u0301🙂🚀"
)


class UnicodeText(Text):
    """Any ``str`` up to ``max_length`` characters (``None``: no limit).

    Args:
        max_length: longest string the space contains, or None for unbounded.
        sample_length: longest string ``sample()`` draws.
        seed: seed for the space's RNG.
    """

    def __init__(
        self, max_length: int | None = None, *, sample_length: int = 64, seed: int | None = None
    ) -> None:
        super().__init__(
            max_length=sample_length, min_length=0, charset=_SAMPLE_ALPHABET, seed=seed
        )
        self.unicode_max_length = max_length
        self.sample_length = sample_length

    def contains(self, x: Any) -> bool:
        if not isinstance(x, str):
            return False
        return self.unicode_max_length is None or len(x) <= self.unicode_max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        length = int(self.np_random.integers(0, self.sample_length + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
        return "".join(_SAMPLE_ALPHABET[int(i)] for i in np.asarray(picks))

    def __repr__(self) -> str:
        return f"UnicodeText(max_length={self.unicode_max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, UnicodeText)
            and other.unicode_max_length == self.unicode_max_length
            and other.sample_length == self.sample_length
        )

    def __hash__(self) -> int:
        return hash((UnicodeText, self.unicode_max_length, self.sample_length))


@create_shared_memory.register(UnicodeText)
def _no_shared_memory(space: UnicodeText, n: int = 1, ctx: Any = None) -> Any:
    # Text's shared buffer holds a fixed number of characters of a fixed charset: it would
    # cut or reject real observations. Raising here makes AsyncVectorEnv say to pass
    # shared_memory=False instead of failing on the first long observation.
    raise CustomSpaceError(
        "UnicodeText observations are arbitrary-length text: create AsyncVectorEnv with shared_memory=False."
    )


_PAD = -1
_MAX_CODE_POINT = 0x10FFFF


def _bounded(space: UnicodeText) -> int:
    if space.unicode_max_length is None:
        raise ConfigError(
            "UnicodeText(max_length=None) cannot be flattened: its strings (observations, replies) have no "
            "fixed length, and a flat vector needs one. Tokenise the text yourself, or flatten a "
            "UnicodeText(max_length=N), which holds Unicode code points padded to N."
        )
    return space.unicode_max_length


@flatdim.register(UnicodeText)
def _flatdim_unicode(space: UnicodeText) -> int:
    return _bounded(space)


@flatten_space.register(UnicodeText)
def _flatten_space_unicode(space: UnicodeText) -> Box:
    return Box(low=_PAD, high=_MAX_CODE_POINT, shape=(_bounded(space),), dtype=np.int32)


@flatten.register(UnicodeText)
def _flatten_unicode(space: UnicodeText, x: str) -> np.ndarray[Any, np.dtype[np.int32]]:  # type: ignore[misc]  # mypy cannot match Text (Space[str]) to Space[T]
    length = _bounded(space)
    if not space.contains(x):
        raise ConfigError(f"cannot flatten {type(x).__name__} of length {len(x) if isinstance(x, str) else '?'} "
                          f"into UnicodeText(max_length={length}): not an element of the space.")
    out = np.full(length, _PAD, dtype=np.int32)
    out[: len(x)] = [ord(c) for c in x]
    return out


@unflatten.register(UnicodeText)
def _unflatten_unicode(space: UnicodeText, x: Any) -> str:  # type: ignore[misc]
    _bounded(space)
    codes = np.asarray(x).astype(np.int64).ravel()
    return "".join(chr(int(c)) for c in codes if c != _PAD)


# ------------------------------------------------------------------ chat messages

CHAT_ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")


class ChatMessageSpace(Space[dict[str, Any]]):
    """One OpenAI chat message: a dict with a ``role`` of :data:`CHAT_ROLES` and a ``content``
    that is a ``str`` (or None for an assistant message with ``tool_calls``); a ``tool``
    message also has a ``tool_call_id``, an assistant message may have a list of ``tool_calls``.

    ``sample()`` draws a user message with random Unicode text.
    """

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(shape=None, dtype=None, seed=seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def contains(self, x: Any) -> bool:
        if not isinstance(x, dict) or x.get("role") not in CHAT_ROLES:
            return False
        content = x.get("content")
        calls = x.get("tool_calls")
        if x["role"] == "tool" and not isinstance(x.get("tool_call_id"), str):
            return False
        if calls is not None and (x["role"] != "assistant" or not isinstance(calls, list)
                                  or not all(isinstance(c, dict) for c in calls)):
            return False
        return isinstance(content, str) or (content is None and bool(calls))

    def sample(self, mask: Any = None, probability: Any = None) -> dict[str, Any]:
        picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=int(self.np_random.integers(0, 65)))
        return {"role": "user", "content": "".join(_SAMPLE_ALPHABET[int(i)] for i in np.asarray(picks))}

    def __repr__(self) -> str:
        return "ChatMessageSpace()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ChatMessageSpace)

    def __hash__(self) -> int:
        return hash(ChatMessageSpace)


class ChatSpace(Sequence):
    """A conversation: a ``list`` (or ``tuple``) of chat messages (:class:`ChatMessageSpace`).

    A subclass of gymnasium's ``Sequence``, so the vector utilities batch it (as a tuple of
    conversations) and ``check_env`` accepts it; unlike ``Sequence`` it also contains lists,
    the form chat APIs and chat templates take. ``sample()`` returns a list.
    """

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(ChatMessageSpace(), stack=False, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, (list, tuple)) and all(self.feature_space.contains(m) for m in x)

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, Any]]:
        return list(super().sample())

    def __repr__(self) -> str:
        return "ChatSpace()"

    def __eq__(self, other: Any) -> bool:
        return isinstance(other, ChatSpace)

    def __hash__(self) -> int:
        return hash(ChatSpace)
