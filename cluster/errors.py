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
