"""However ``tom peer`` ends -- its run returns, or ends in Ctrl-C before it listens for signals, or in
an error -- it leaves SIGINT and SIGTERM ignored: the interpreter's exit that follows (where Python
puts back the default action of a signal that had a Python handler) is not ended by a signal, and the
exit status stays the peer's own (tests/test_e2e_edges.py floods a real peer with SIGTERM)."""

from __future__ import annotations

import signal

import pytest

from tom import cli
from tom.errors import TomError
from tom.peer import process

SIGNALS = (signal.SIGINT, signal.SIGTERM)


@pytest.fixture
def handlers():
    """This process's handlers, put back after the test."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    yield
    for sig, handler in before.items():
        signal.signal(sig, handler)


def _ended(error: BaseException | None):
    async def run(self):
        self.signals_taken = False
        if error is not None:
            raise error
    return run


@pytest.mark.parametrize(("error", "status"), [(None, 0), (KeyboardInterrupt(), 130), (TomError("broken"), 2)],
                         ids=["returns", "ctrl-c-before-it-listens", "error"])
def test_however_the_peer_ends_its_signals_are_ignored_after(tmp_path, monkeypatch, handlers, error, status):
    (tmp_path / "nb.txt").write_text("127.0.0.1:47001\n")
    monkeypatch.setattr(process.Peer, "run", _ended(error))
    monkeypatch.setattr(process.Peer, "exit_code", 0, raising=False)
    assert cli.main(["peer", str(tmp_path / "nb.txt"), str(tmp_path / "out.jsonl"), "47001", "--no-ui",
                     "--host", "127.0.0.1"]) == status
    assert [signal.getsignal(sig) for sig in SIGNALS] == [signal.SIG_IGN, signal.SIG_IGN]
