"""Start scripts that end in another shell (AgentBench has one ending with ``su - jack``): the
episode starts, and the agent's commands run in that shell, on every real sandbox."""

from __future__ import annotations

import pytest

from agentunit_gym.domains.os.env import OSEnv
from agentunit_gym.domains.os.task import OSTask
from agentunit_gym.errors import ConfigError
from tests.backends.test_local_users import many_users, skip_unless_many_users

BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


def _bash(command: str) -> str:
    return f"Think: look.\nAct: bash\n```bash\n{command}\n```"


SU_JACK = OSTask.model_validate({
    "id": "start-su-jack", "instruction": "Who are you?",
    "start": "useradd -m -s /bin/bash jack\necho ready > /tmp/ready\nsu - jack",
    "evaluation": {"match": "jack"},
})
NESTED_BASH = OSTask.model_validate({
    "id": "start-bash", "instruction": "Where are you?",
    "start": "mkdir -p /tmp/work && cd /tmp/work && export FROM_START=1\nbash",
    "evaluation": {"match": "/tmp/work"},
})


@pytest.mark.parametrize("backend", BACKENDS)
def test_start_script_ending_in_su_hands_the_shell_to_jack(backend: str) -> None:
    with OSEnv(backend=backend, tasks=[SU_JACK]) as env:
        env.reset(options={"task_id": "start-su-jack"})
        obs, *_ = env.step(_bash("whoami; pwd; cat /tmp/ready"))
        if not env.multi_user:
            # One uid is mapped there (a local sandbox not started by root): su failed at the
            # start (with a note), root goes on.
            assert backend == "local"
            assert obs == "The output of the OS:\n\nroot\n/root\nready\n"
            return
        assert obs == "The output of the OS:\n\njack\n/home/jack\nready\n"
        obs, *_ = env.step(_bash("touch /root/x"))
        assert "Permission denied" in obs and "[exit code 1]" in obs
        obs, *_ = env.step(_bash("exit"))
        obs, *_ = env.step(_bash("whoami"))
        assert obs == "The output of the OS:\n\nroot\n"
        _, reward, terminated, _, _ = env.step("Act: answer(jack)")
        assert terminated and reward == 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_start_script_ending_in_bash_runs_the_agent_there(backend: str) -> None:
    with OSEnv(backend=backend, tasks=[NESTED_BASH]) as env:
        env.reset(options={"task_id": "start-bash"})
        obs, *_ = env.step(_bash('pwd; echo "$FROM_START $SHLVL"'))
        assert obs == "The output of the OS:\n\n/tmp/work\n1 2\n"
        obs, *_ = env.step(_bash("exit 3"))
        assert "[exit code 3]" in obs
        obs, *_ = env.step(_bash('echo "$SHLVL"'))
        assert obs == "The output of the OS:\n\n1\n"


INIT_SU = OSTask.model_validate({
    "id": "init-su-jack", "instruction": "Who are you?",
    "init": ["useradd -m -s /bin/bash jack\nsu - jack"],
    "evaluation": {"match": "root"},
})


@pytest.mark.parametrize("backend", BACKENDS)
def test_init_script_ending_in_su_does_not_carry_over(backend: str) -> None:
    if backend == "local":
        skip_unless_many_users()
    # Init scripts run outside the agent's shell with no terminal (AgentBench: `exec_run`):
    # su's shell reads end-of-file and exits 0, and the agent's shell is root's.
    with OSEnv(backend=backend, tasks=[INIT_SU]) as env:
        env.reset(options={"task_id": "init-su-jack"})
        obs, *_ = env.step(_bash("whoami; id -un jack"))
        assert obs == "The output of the OS:\n\nroot\njack\n"


def test_one_uid_local_sandbox_starts_su_items_as_root_and_leaves_out_user_tasks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # What a non-root caller gets (simulated: the range refused): su fails at the start with the
    # note, root goes on; tasks that declare needs_users are left out of the env's tasks.
    from agentunit_gym.backends.sandbox import usermap

    monkeypatch.setattr(usermap, "user_switching", lambda isolation="auto": usermap.Support(False, "test"))
    chown = OSTask.model_validate({"id": "give-jack", "instruction": "Give /tmp/f to jack.", "needs_users": True,
                                   "users_note": "acts as another user (example: chown jack)",
                                   "evaluation": {"match": "x"}})
    with OSEnv(backend="local", tasks=[SU_JACK, chown]) as env:
        assert env.multi_user is False
        assert [t.id for t in env.tasks] == ["start-su-jack"]
        with pytest.raises(ConfigError, match=r"'give-jack' cannot run in this env \(not run on local: acts as another "
                                              r"user \(example: chown jack\); this sandbox maps one uid .*\): it maps "
                                              r"one uid here \(run as root, or use --backend docker\)\."):
            env.reset(options={"task_id": "give-jack"})
        env.reset(options={"task_id": "start-su-jack"})
        obs, *_ = env.step(_bash("whoami; pwd; cat /tmp/ready"))
        assert obs == "The output of the OS:\n\nroot\n/root\nready\n"


@many_users
def test_a_root_callers_local_env_runs_user_tasks() -> None:
    chown = OSTask.model_validate({"id": "give-jack", "instruction": "Give /tmp/f to jack.", "needs_users": True,
                                   "init": ["useradd -m jack; touch /tmp/f"],
                                   "evaluation": {"check": ['[ "$(stat -c %U /tmp/f)" = jack ]']},
                                   "reference_solution": [{"bash": "chown jack /tmp/f"}, {"finish": None}]})
    with OSEnv(backend="local", tasks=[chown]) as env:
        assert env.multi_user is True and [t.id for t in env.tasks] == ["give-jack"]
        env.reset(options={"task_id": "give-jack"})
        env.step(_bash("chown jack /tmp/f"))
        _, reward, terminated, _, _ = env.step("Act: finish")
        assert terminated and reward == 1.0
