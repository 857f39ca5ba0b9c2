"""The learner's own reasons to stop, importable without torch (the wiring turns them into RunFailed)."""


class TrainingStopped(RuntimeError):
    """The learner cannot go on (non-finite losses or gradients step after step); the message says
    at which step and what was not finite."""
