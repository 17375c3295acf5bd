"""The ``local`` sandbox: Linux namespaces on this machine, no daemon.

Layout of one sandbox:

* a **holder** process starts the namespaces (user, pid, net, mount, ipc, uts) with
  bubblewrap when it is installed, else with ``unshare`` and ``images/local/setup.sh``.
  The sandbox's root is its own: a read-only tmpfs holding read-only binds of the host's
  system dirs (``/usr`` and the ``/bin``, ``/sbin``, ``/lib*`` links or dirs) and fresh
  writable dirs (``/etc``, ``/tmp``, ``/root``, ``/home``, ``/var``, ``/run``) made for
  each box: ``/etc`` from our own passwd/group/shadow plus an allowlist of the host's
  system configuration (:data:`HOST_ETC`), the rest empty. Nothing else of the host (its
  ``/etc``, ``/root``, ``/home``, ``/var``, ``/srv``, ``/opt``, ``/mnt``, ``/media``, this
  checkout) is mounted. ``/proc`` and ``/dev`` are private and minimal; there is no
  network. Root inside maps to one unprivileged host uid: the caller's own, or, when the
  caller is root, :data:`ROOT_CALLER_UID` (the holder and every process entering the
  sandbox drop to it with ``setpriv`` first), followed then by uids 1-65535 inside
  (:mod:`~agentunit_gym.backends.sandbox.usermap`: :attr:`LocalSandbox.multi_user`). The
  holder waits on a pipe from us, so when our process goes away the whole pid namespace
  goes with it.
* the agent's **persistent shell** and every one-off ``run()`` enter the holder's
  namespaces with ``nsenter``, so init scripts and checks see exactly what the agent sees
  (files and processes) without going through the agent's shell.
* shells nest as in a terminal: a command that starts another interactive shell (``bash``,
  ``sh``) hands it the terminal, and the next commands are written there as lines until it
  exits (the supervisor's shell detection is shared; see docs/sandbox-docker.md); ``su -
  jack`` too where many users are mapped. With one uid, ``su`` fails at once, with a note.
* the agent's processes hold the docker sandbox's capabilities only
  (:data:`AGENT_CAPABILITIES`, dropped with ``setpriv`` inside the box), and its shell gets
  pid, mount and IPC namespaces and a ``/dev/shm`` of its own; the box's ``/dev`` is
  read-only. So the agent cannot change the box's own namespaces.
* all of that (dirs, holder, shell) is one **box**. ``reset()`` resets it in place: it
  kills the agent's pid namespace (every process of the episode), puts the writable dirs
  back as they started (what is unchanged stays) and takes the next episode's shell,
  started in the background. When that cannot be proven safe (the box's mount points
  moved, or something ran in the box's own namespaces), it kills the box's holder and
  continues in a new box (the **warm spare**, built in the background after such a reset).

Limits (:mod:`~agentunit_gym.backends.sandbox.limits`, the same as the docker sandbox's): a
cgroup per sandbox (:mod:`.cgroup`: memory without swap, CPU, pids) where the host gives one
(root on cgroup v1/v2 hosts, or a delegated cgroup), and a size-bounded tmpfs under each
box's writable dirs (:mod:`.box_tmpfs`, root only). Without a pids cgroup, ``RLIMIT_NPROC``
on the processes that enter the sandbox, counted inside the sandbox's own user namespace
(root callers' sandboxes run as an unprivileged uid, so it binds them too). What does not
apply here is in :attr:`LocalSandbox.limits_off`. After each command, what it left forking
past ``runaway_budget`` is killed so the next command can run.
See docs/sandbox-local.md.

The package, by concern: :mod:`.sandbox` (the :class:`LocalSandbox` class: options, start,
reset, close, put together from the parts below, which share :mod:`.setup`'s options and
state and call each other through narrow interfaces, none inheriting from another),
:mod:`.box` (a box and its processes), :mod:`.oneoff` (one-off commands), :mod:`.files`
(the file helpers), :mod:`.shell` (the agent's shell, on the driver it shares with the
docker sandbox), :mod:`.reset` (the reset in place), :mod:`.spare` (new boxes and the warm
spare), :mod:`.isolation` (the namespace tools' argv and their detection),
:mod:`.etc_template` (the ``/etc`` template), :mod:`.cgroup` (the box's cgroup: memory, CPU,
pids), :mod:`.box_tmpfs` (the box's size-bounded tmpfs), :mod:`.procfs` (``/proc``
scanning) and :mod:`.hostfs` (host-side file helpers).
"""

from agentunit_gym.backends.sandbox.local.etc_template import (
    ETC_READ_ONLY,
    ETC_READ_ONLY_FILES,
    HOST_ETC,
    SHM_MIN_FREE,
    build_etc,
    default_temp_parent,
    release_etc_template,
    shared_etc_template,
)
from agentunit_gym.backends.sandbox.local.isolation import (
    ROOT_CALLER_UID,
    SYSTEM_DIRS,
    WRITABLE_DIRS,
    Isolation,
    _find_masked_system_dirs,
    agent_caps_argv,
    bwrap_agent_argv,
    detect_isolation,
    drop_privileges_argv,
    masked_system_dirs,
    system_layout,
)
from agentunit_gym.backends.sandbox.local.sandbox import BoxInfo, LocalSandbox, ResetFault
from agentunit_gym.backends.sandbox.local.shell import USER_SWITCH_NOTE

__all__ = [
    "ETC_READ_ONLY", "ETC_READ_ONLY_FILES", "HOST_ETC", "ROOT_CALLER_UID", "SHM_MIN_FREE", "SYSTEM_DIRS",
    "USER_SWITCH_NOTE", "WRITABLE_DIRS", "BoxInfo", "Isolation", "LocalSandbox", "ResetFault",
    "_find_masked_system_dirs", "agent_caps_argv", "build_etc", "bwrap_agent_argv", "default_temp_parent",
    "detect_isolation", "drop_privileges_argv", "masked_system_dirs", "release_etc_template", "shared_etc_template",
    "system_layout",
]
