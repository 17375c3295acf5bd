"""What a run says when its backend cannot run the whole suite (``left_out_note``)."""

from __future__ import annotations

from agentunit_gym.domains.os.domain import DOMAIN
from agentunit_gym.tasks.spec import TaskSpec, left_out_note


def task(id: str, backends: tuple[str, ...] | None) -> TaskSpec:
    return TaskSpec(id=id, instruction="x", backends=backends)


def test_docker_only_tasks_left_out_say_start_docker() -> None:
    suite = [task("a", None), task("b", ("docker",)), task("c", ("docker",)), task("d", ("docker", "local"))]
    assert left_out_note(suite, "local", needs_docker={"docker"}) == (
        "2 docker-only tasks left out on backend local: start Docker (or pass --backend docker) for the full suite")
    # Without knowing which backends need Docker, the hint only names the backend.
    assert left_out_note(suite, "local") == (
        "2 docker-only tasks left out on backend local: use --backend docker for the full suite")
    assert left_out_note(suite, "docker") is None


def test_one_task_of_another_backend() -> None:
    assert left_out_note([task("a", ("mysql",))], "sqlite") == (
        "1 mysql-only task left out on backend sqlite: use --backend mysql for the full suite")


def test_the_bundled_os_suite_on_local() -> None:
    suite = DOMAIN.bundled_tasks()
    docker_only = [t for t in suite if t.backends == ("docker",)]
    assert docker_only  # the bundled suite has tasks that need a full root filesystem
    note = left_out_note(suite, "local")
    assert note is not None and note.startswith(f"{len(docker_only)} docker-only tasks left out on backend local")
