"""The neighbors file: one ``host:port`` per line; blank lines and ``#`` comments are allowed."""

from __future__ import annotations

from pathlib import Path

from ..errors import ConfigError
from .pid import parse_pid, sorted_pids


def load_neighbors(path: str | Path, *, file_order: bool = False) -> list[str]:
    """Return the canonical pids of ``path`` in pid order (in the file's order with ``file_order``),
    duplicates dropped.

    Raises ConfigError naming the file (and line) when it cannot be read or a line is not host:port.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: neighbors file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read neighbors file ({e.__class__.__name__}: {e})") from None
    pids: dict[str, None] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            pids.setdefault(parse_pid(line))
        except ConfigError as e:
            raise ConfigError(f"{path}:{number}: {e}") from None
    if not pids:
        raise ConfigError(f"{path}: no neighbors in the file")
    return list(pids) if file_order else sorted_pids(pids)
