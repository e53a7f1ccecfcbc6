"""The bearer token that guards a peer's HTTP API when the group is closed.

The token lives in one file, ``api-token`` in the group's keys folder (`token_path`), so every peer
started with the same folder, and the launcher printing the group page's URL, use the same token.
The file is created on first use, atomically and readable by its owner only (0600): peers started
together race to create it and all end up with the one that won. A token is 32 random bytes in
URL-safe base64 (43 characters).
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from ..errors import ConfigError

TOKEN_FILE = "api-token"


def token_path(keys_dir: Path) -> Path:
    """Where the API token of the group whose keys are in ``keys_dir`` is kept."""
    return Path(keys_dir) / TOKEN_FILE


def load_or_create_token(path: Path) -> str:
    """The token in ``path``, created (0600, atomically) if the file does not exist yet."""
    path = Path(path)
    if not path.exists():
        if not path.parent.is_dir():
            raise ConfigError(f"{path.parent}: no such folder for the API token")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write(secrets.token_urlsafe(32) + "\n")
            try:
                os.link(tmp, path)  # atomic; fails if another peer created it first
            except FileExistsError:
                pass
        except OSError as e:
            raise ConfigError(f"cannot create the API token {path}: {e.strerror or e}") from None
        finally:
            tmp.unlink(missing_ok=True)
    try:
        token = path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read the API token {path}: {getattr(e, 'strerror', None) or e}") from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise ConfigError(f"{path}: not an API token (one line of at least 16 characters)")
    return token


def token_matches(expected: str, authorization: str | None) -> bool:
    """Whether an ``Authorization`` header carries ``Bearer <expected>`` (compared in constant time)."""
    if not authorization:
        return False
    scheme, _, given = authorization.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), expected.encode())
