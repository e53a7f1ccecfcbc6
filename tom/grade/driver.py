"""A handout tool in a pseudo-terminal, answered as a student would answer it (a thin trio shell).

The tool runs under ``/bin/sh -c RUN`` in its own session (so its whole process tree is one process
group, killed at the end whatever it does), with a pty for stdin, stdout and stderr, ``TERM=dumb``
and a 200-column window. Everything it prints goes to ``terminal.log``, our answers included (the
terminal echoes them). What to type is decided by `prompts.decide` over the output not yet answered:

* `start`: until the menu shows, each time the output goes quiet answer the last question asked
  (the address to listen on, the ``from``); an answer typed 5 times in a row means the tool keeps
  asking (it refused it);
* `send`, `status`, `quit`: wait for the menu (at most `MENU_WAIT`), type its key, and for `send` wait
  for the text prompt and type the text.
"""

from __future__ import annotations

import codecs
import fcntl
import os
import signal
import struct
import termios
from pathlib import Path
from typing import TextIO

import trio

from .prompts import LOOPBACK, Decision, MenuKeys, PromptRule, decide, plain, tail_lines

QUIET = 0.25  # seconds without output before a start-up question is taken as asked
MENU_WAIT = 3.0  # seconds to wait for the menu (or the text prompt) before typing anyway
ASKED_AGAIN = 5


class ToolError(Exception):
    """The tool did not do what the driver needed; ``verdict`` is the run's verdict."""

    def __init__(self, verdict: str, got: str) -> None:
        super().__init__(got)
        self.verdict, self.got = verdict, got


class Tool:
    """One run of a student's tool in a pty."""

    def __init__(self, command: str, cwd: Path, log: Path, port: int,
                 rules: tuple[PromptRule, ...], keys: MenuKeys = MenuKeys()) -> None:
        self.command, self.cwd, self.port = command, cwd, port
        self.rules, self.keys = rules, keys
        self.screen = ""  # everything printed, escapes removed
        self.cursor = 0  # the screen up to here is answered
        self.typed: list[str] = []
        self._log_path = log
        self._log: TextIO | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._master = -1
        self.process: trio.Process | None = None
        self.last_output = trio.current_time()
        self._changed = trio.Event()
        self.quitting = False  # we asked it to quit (an exit after this is no crash)
        self.exit_time: float | None = None

    # -- the process ------------------------------------------------------------------------------
    async def spawn(self, nursery: trio.Nursery) -> None:
        master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TOM_PURE", "PYTHONSTARTUP")}
        env["TERM"] = "dumb"
        self._log = open(self._log_path, "w", encoding="utf-8", errors="replace")
        try:
            self.process = await trio.lowlevel.open_process(
                ["/bin/sh", "-c", self.command], stdin=slave, stdout=slave, stderr=slave, cwd=str(self.cwd),
                env=env, start_new_session=True)
        finally:
            os.close(slave)
        os.set_blocking(master, False)
        self._master = master
        nursery.start_soon(self._read)
        nursery.start_soon(self._watch)

    async def _read(self) -> None:
        try:
            while True:
                if self._master < 0:  # stop() closed the terminal before this turn (a tool ended and
                    break             # stopped before the reader first ran): it took what was left
                try:
                    await trio.lowlevel.wait_readable(self._master)
                except trio.ClosedResourceError:  # stop() closed the terminal: it took what was left
                    break
                try:
                    data = os.read(self._master, 65536)
                except BlockingIOError:
                    continue
                except OSError:  # EIO: every holder of the slave side is gone
                    data = b""
                if not data:
                    break
                self._take(data)
        finally:
            self._notify()

    async def _watch(self) -> None:
        assert self.process is not None
        await self.process.wait()
        self.exit_time = trio.current_time()
        self._notify()

    def _take(self, data: bytes) -> None:
        """``data`` read from the terminal: to the log and the screen."""
        text = self._decoder.decode(data)
        if self._log is not None:
            self._log.write(text)
            self._log.flush()
        self.screen += plain(text)
        self.last_output = trio.current_time()
        self._notify()

    def _drain(self) -> None:
        """Take what the terminal still holds, without waiting: a tool that printed and ended at once
        may have ended before its last lines were read, and they are the ones a verdict shows."""
        for _ in range(1024):  # (64 MiB at most: a process outside the tool's group may still write)
            try:
                data = os.read(self._master, 65536)
            except OSError:  # BlockingIOError: nothing left; EIO: every holder of the slave side is gone
                return
            if not data:
                return
            self._take(data)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def _changes(self, limit: float) -> None:
        with trio.move_on_after(limit):
            await self._changed.wait()

    @property
    def exited(self) -> bool:
        return self.process is not None and self.process.returncode is not None

    def exit_line(self) -> str:
        code = self.process.returncode if self.process is not None else None
        if code is None:
            return "still running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"

    def tail(self, n: int = 20) -> list[str]:
        return tail_lines(self.screen, n)

    def type(self, answer: str) -> None:
        self.typed.append(answer)
        try:
            os.write(self._master, (answer + "\r").encode("utf-8"))
        except OSError as e:
            raise ToolError("crashed", f"its terminal is closed ({e.strerror}); {self.exit_line()}") from None

    async def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL after 1 s, then take what the terminal still
        holds and close it."""
        if self.process is not None:
            pgid = self.process.pid
            for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, 1.0)):
                try:
                    os.killpg(pgid, sig)
                except (ProcessLookupError, PermissionError):
                    break
                with trio.move_on_after(grace):
                    await self.process.wait()
                    # the leader is gone; its group may not be
                    await trio.sleep(0.05)
            with trio.move_on_after(2):
                await self.process.wait()
        if self._master >= 0:
            self._drain()
            # the reader may still wait on the terminal (a process outside the group can hold it
            # open): wake it before the close, or another run of this process reusing the fd number
            # would find a waiter already on it (trio: BusyResourceError)
            trio.lowlevel.notify_closing(self._master)
            try:
                os.close(self._master)
            except OSError:
                pass
            self._master = -1
        if self._log is not None:
            self._log.close()
            self._log = None

    # -- the dialogue -----------------------------------------------------------------------------
    def _decide(self, menu: str | None = None, text: str | None = None) -> Decision | None:
        fill = {"ip": LOOPBACK, "port": str(self.port), "menu": menu, "text": text}
        return decide(self.screen[self.cursor:], self.rules, fill)  # type: ignore[arg-type]

    def _check_alive(self, doing: str) -> None:
        if self.exited and not self.quitting:
            raise ToolError("crashed", f"it ended {doing} ({self.exit_line()})")

    async def start(self, limit: float) -> None:
        """Answer the start-up questions until the menu shows (ToolError after ``limit`` seconds)."""
        deadline = trio.current_time() + limit
        decided_at = -1
        repeats: dict[str, int] = {}
        while True:
            self._check_alive("before its menu showed")
            now = trio.current_time()
            if now >= deadline:
                last = self.tail(1)
                raise ToolError("did-not-start", f"no menu after {limit:.0f} s (last line: "
                                                 f"{last[0] if last else 'nothing printed'!r})")
            if len(self.screen) == decided_at or now - self.last_output < QUIET:
                await self._changes(min(QUIET, deadline - now))
                continue
            decided_at = len(self.screen)
            decision = self._decide()
            if decision is None:
                continue
            if decision.rule.is_menu:  # left unanswered: the first command finds it
                return
            if decision.answer is None:
                continue
            repeats[decision.rule.pattern] = repeats.get(decision.rule.pattern, 0) + 1
            if repeats[decision.rule.pattern] >= ASKED_AGAIN:
                raise ToolError("did-not-start", f"it asked {decision.rule.pattern!r} {ASKED_AGAIN} times "
                                                 f"(last answer {decision.answer!r})")
            self.cursor += decision.end
            self.type(decision.answer)

    async def _await_rule(self, want: str, limit: float, consume: bool = True, **fill: str | None) -> bool:
        """Wait for the menu (``want`` = "menu") or the text prompt ("text") to be the last question;
        ``consume``: take it as answered."""
        deadline = trio.current_time() + limit
        while True:
            self._check_alive("while the driver waited for its " + want)
            decision = self._decide(**fill)
            if decision is not None and (decision.rule.is_menu if want == "menu" else decision.rule.wants_text):
                if consume:
                    self.cursor += decision.end
                return True
            now = trio.current_time()
            if now >= deadline:
                return False
            await self._changes(min(0.2, deadline - now))

    async def menu(self, key: str) -> None:
        await self._await_rule("menu", MENU_WAIT, menu=key)
        self.type(key)

    async def send(self, text: str) -> None:
        """Menu ``send`` and ``text``."""
        await self.menu(self.keys.send)
        await self._await_rule("text", MENU_WAIT, text=text)
        self.type(text)

    async def status(self) -> str:
        """Menu ``status``; what it printed until the menu showed again (at most `MENU_WAIT` s)."""
        await self.menu(self.keys.status)
        start = len(self.screen)
        await self._await_rule("menu", MENU_WAIT, consume=False, menu=None)
        return self.screen[start:]

    async def quit(self, limit: float) -> float | None:
        """Menu ``quit``; seconds until the process ended, None if it still runs after ``limit``."""
        await self._await_rule("menu", MENU_WAIT, menu=self.keys.quit)
        self.quitting = True
        asked = trio.current_time()
        if self.exited:
            return 0.0
        self.type(self.keys.quit)
        assert self.process is not None
        with trio.move_on_after(limit):
            await self.process.wait()
            return trio.current_time() - asked
        return None
