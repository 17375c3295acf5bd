"""The command table: the commands a user can type, each one answering ``--help``."""

from __future__ import annotations

import pytest

from agentunit_gym.cli.main import main

COMMANDS = {
    "tasks": "tasks",
    "images": "images",
    "cleanup": "cleanup",
    "eval": "eval",
    "judge": "judge",
    "compare": "compare",
    "export": "export",
    "mcp": "mcp",
    "serve": "serve",
    "webshop": "WebShop",  # brought by the webshop domain package (its cli module), named nowhere in cli/
}
"""Every top-level command, written down here (README and docs name them), with a word its
``--help`` description contains."""


def test_the_top_level_help_lists_exactly_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    # The command list: lines indented by four spaces under "COMMAND", one per command.
    block = out.split("  COMMAND\n", 1)[1].split("\noptions:", 1)[0]
    listed = [line.split()[0] for line in block.splitlines()
              if line.startswith("    ") and not line.startswith("     ")]
    assert sorted(listed) == sorted(COMMANDS)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_each_command_answers_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: agentunit-gym {command} ")
    assert COMMANDS[command].lower() in out.lower()


def test_an_unknown_command_is_a_one_line_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["evaluate"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "invalid choice: 'evaluate'" in err
