"""TOM's error hierarchy.

`TomError` is the base. A remote peer's mistake (`FrameError`) is kept apart from configuration errors
(`ConfigError`: bad neighbors file, port in use, unwritable output) and local misuse (`UsageError`).
Every message is one line a user can read; tracebacks are only for bugs.
"""


class TomError(Exception):
    """Base of every error TOM raises on purpose."""


class FrameError(TomError):
    """A frame received from the network is malformed, too large or not allowed where it came."""


class ConfigError(TomError):
    """The configuration (neighbors file, address, port, output path) cannot be used."""


class OutputError(TomError):
    """The output file cannot be written (e.g. the disk is full): the message names file and cause."""


class UsageError(TomError):
    """The local user asked for something that cannot be done (e.g. sending an over-long message)."""


class RefusedError(FrameError):
    """A neighbor refused this peer's connection (REFUSED); the message is its reason."""


class KeyConflict(UsageError):
    """An idempotency key already accepted with another text: the new text is not accepted."""
