"""The AgentUnit env server, started the way the serve image starts it.

``main()`` runs the image's own entrypoint (``agentunit_gym/images/serve/entrypoint.sh``):
``agentunit-gym serve`` on 0.0.0.0:8000, serving ``$AGENTUNIT_GYM_ENV`` (default DB-v0) with
``$AGENTUNIT_GYM_BACKEND``, and the bearer token in ``$AGENTUNIT_GYM_TOKEN`` (required: the
server refuses to listen beyond loopback without one). Arguments are added to the command.

``app`` (the manifest's ``server.app:app``, for ``uvicorn server.app:app``) is the ASGI app of
that server, built on first use; it needs ``$AGENTUNIT_GYM_TOKEN`` too, since the address
uvicorn binds is not known here.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from agentunit_gym.backends.images import IMAGES_ROOT

ENTRYPOINT = IMAGES_ROOT / "serve" / "entrypoint.sh"


def main() -> None:
    """Replace this process with the serve image's entrypoint (arguments passed on), which
    runs the ``agentunit-gym`` installed beside this Python."""
    os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    os.execvp("sh", ["sh", str(ENTRYPOINT), *sys.argv[1:]])


_built: dict[str, Any] = {}
"""The app, once built: every later lookup of ``app`` gets the same one (one session pool)."""


def __getattr__(name: str) -> Any:
    if name != "app":
        raise AttributeError(name)
    if "app" in _built:
        return _built["app"]
    from agentunit_gym.errors import ConfigError
    from agentunit_gym.serve.server import TOKEN_ENV_VAR, EnvServer, ServeConfig

    token = os.environ.get(TOKEN_ENV_VAR) or None
    if token is None:
        raise ConfigError(f"the AgentUnit env server's app needs a token: set {TOKEN_ENV_VAR} (the address "
                          "uvicorn binds is not known here, so it is never served without one).")
    config = ServeConfig(env=os.environ.get("AGENTUNIT_GYM_ENV", "DB-v0"),
                         backend=os.environ.get("AGENTUNIT_GYM_BACKEND") or None, token=token, check_reset=True)
    server = EnvServer(config)
    server.pool.start()
    _built["app"] = server.app
    return server.app


if __name__ == "__main__":
    main()
