"""Counting the py4j commands a piece of PySpark code sends to the JVM."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def round_trips(jvm) -> Iterator[list[str]]:
    """The py4j commands sent through ``jvm``'s gateway client meanwhile, in a list; not py4j's
    releases of the JVM objects of proxies Python collected, which come whenever the collector runs
    (a pass that collects a previous test's proxies sends dozens)."""
    from py4j import protocol

    client = jvm._gateway_client
    sent: list[str] = []
    plain = client.send_command
    release = protocol.MEMORY_COMMAND_NAME + protocol.MEMORY_DEL_SUBCOMMAND_NAME

    def counting(command, *args, **kwargs):
        if not command.startswith(release):
            sent.append(command)
        return plain(command, *args, **kwargs)

    client.send_command = counting
    try:
        yield sent
    finally:
        del client.send_command
