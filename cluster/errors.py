"""What stops a run, with a message for a person (`jury train: <message>`, exit 1)."""


class RunFailed(RuntimeError):
    """A run that cannot go on; its message says why, for a person to read."""


class SyncTimeout(RunFailed):
    """A weight sync waited past sync_timeout_s for a role; the message names it."""
