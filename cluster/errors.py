"""What stops a run, with a message for a person (`jury train: <message>`, exit 1)."""


class RunFailed(RuntimeError):
    """A run that cannot go on; its message says why, for a person to read."""


class DiskFull(RunFailed):
    """A run-folder file could not be written; the message names the path and the free space."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM (Slurm, Kubernetes, systemd): every actor was stopped; `message` says
    whether a checkpoint exists to resume from."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SyncTimeout(RunFailed):
    """A weight sync waited past sync_timeout_s for a role; the message names it."""


def ray_start_failed(address: str | None, load: float, cores: int) -> str:
    """What to say when `ray.init` gives up on its node. The usual cause on a busy machine: the raylet
    waits a fixed 15 s for the dashboard agent to write its port file and then exits
    (ray-project/ray issue 65983; no setting changes the 15 s)."""
    where = f"the Ray cluster at {address}" if address else "a local Ray node"
    return (f"{where} did not start: Ray's raylet exits when its dashboard agent has not reported within a "
            f"fixed 15 s (ray-project/ray issue 65983), which happens on a loaded machine (load average "
            f"{load:.1f} on {cores} cores now). Start the run when the machine is quieter, or start Ray once "
            f"(`ray start --head`, again until it comes up) and give every run RAY_ADDRESS=auto to share it. "
            f"The raylet's own words: /tmp/ray/session_latest/logs/raylet.out")
