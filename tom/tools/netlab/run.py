"""One lab run: a TOM group of real ``tom peer`` processes, each in its own network namespace, fed a
paced workload on stdin (headless, as the launcher does), under a fault schedule; then stopped, the
namespaces removed, and the output files verified with Spark.

Peers are durable unless the run says otherwise (``tom peer --data <run>/data-<i>``). A restarted peer
(`Restart`, then `StartAgain`) runs its very command line again in its namespace
(`tom.tools.peers.start_again`) and its feed goes on after the lines its data folder accepted; it is a
survivor, and at the end its file must hold the group's whole order (`whole_order_problem`).

Invariants: every process started here is stopped by its pid (`tom.tools.peers`: SIGCONT, SIGTERM,
then SIGKILL after a bound) before the namespaces are removed, on every exit path; every wait is bounded
in time.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from ...errors import ConfigError
from ...net.keys import create_keys
from ..launch import make_workload, records, restart_seen
from ..peers import LineTail, NotReady, PeerCommand, PeerExited, PeerGroup, PeerProcess, start_again, write_neighbors
from .network import LabNetwork
from .schedule import (CutOneWay, Event, Heal, Kill, LossOff, LossOn, Partition, Pause, Restart, Resume, StartAgain,
                       describe)

console = Console(highlight=False, soft_wrap=True)
PORT = 5000
MARKER = "#end"  # the text of the barrier message each survivor sends at the end: "<pid> #end"
POLL = 0.05  # seconds between two rounds of the lab's loop
START_LIMIT, FORM_LIMIT, STOP_LIMIT = 30.0, 60.0, 20.0
EXIT_MEANING = {0: "left", 2: "setup error", 3: "removed by the group", 4: "stopped with messages not delivered",
                5: "output not written", -9: "SIGKILL"}


@dataclass
class LabConfig:
    peers: int
    duration: float
    rate: float
    events: list[Event]
    run_dir: Path
    seed: int = 1
    secured: bool = True
    peer_args: list[str] = field(default_factory=list)
    settle: float = 10.0
    deadline: float = 60.0  # seconds after the workload's end
    durable: bool = True  # each peer with a data folder (tom peer --data <run>/data-<i>)


class PeerOutput:
    """What one peer's output file says so far, read incrementally: the views it was a member of (a
    restarted peer's caught-up views, of the time it was away, are only counted), and per origin the
    workload numbers (``#k``) it delivered with when."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines = LineTail(path)
        self.views: list[dict] = []
        self.delivered: dict[str, dict[int, float]] = {}  # origin -> k -> delivered_at
        self.messages = 0
        self.markers: set[str] = set()  # origins whose end marker was delivered here
        self.caught_up = 0  # records a restarted peer caught up

    def update(self) -> bool:
        """Read what was appended; True if anything was."""
        lines = self.lines.new_lines()
        if lines is None:
            return False
        for line in lines:
            try:
                rec = json.loads(line)
            except ValueError:
                continue
            if rec.get("caught_up"):
                self.caught_up += 1
            if rec.get("kind") == "view" and not rec.get("caught_up"):
                self.views.append(rec)
            elif rec.get("kind") == "message":
                self.messages += 1
                k = str(rec.get("text", "")).partition(" #")[2].partition(" ")[0]
                if k == MARKER[1:]:
                    self.markers.add(rec.get("pid"))
                elif k.isdigit():
                    self.delivered.setdefault(rec.get("pid"), {})[int(k)] = rec.get("delivered_at", 0.0)
        return bool(lines)

    @property
    def members(self) -> set[str]:
        return set(self.views[-1]["members"]) if self.views else set()


class LabRun:
    def __init__(self, config: LabConfig, net: LabNetwork) -> None:
        self.config = config
        self.net = net
        self.n = config.peers
        self.pids = {i: f"{net.address(i)}:{PORT}" for i in range(1, self.n + 1)}
        self.messages = max(1, round(config.rate * config.duration))
        self.processes: PeerGroup[int] = PeerGroup(grace=STOP_LIMIT)
        self.pending: dict[int, bytes] = {}
        self.sent = {i: 0 for i in self.pids}
        self.fed_at: dict[int, list[float]] = {i: [] for i in self.pids}
        self.outputs = {i: PeerOutput(self.output(i)) for i in self.pids}
        self.killed: set[int] = set()
        self.down: dict[int, float] = {}  # peers killed by a restart, not started again yet -> wall time
        self.restarts: list[dict] = []  # {"peer", "killed", "started", "accepted"}, wall times
        self.exited: dict[int, int] = {}
        self.applied: list[tuple[float, Event]] = []  # (wall time, event)
        self.keys: Path | None = None
        self.workload: dict[int, list[str]] = {}
        self.markers_sent = False
        self.t0 = 0.0
        self.wall0 = 0.0
        self.figures: dict[str, list] = {}
        self.broken_restarts: list[int] = []  # restarted peers whose file lacks the group's whole order

    def output(self, i: int) -> Path:
        return self.config.run_dir / f"out-{i}.jsonl"

    def log(self, i: int) -> Path:
        return self.config.run_dir / f"log-{i}.txt"

    def data(self, i: int) -> Path:
        return self.config.run_dir / f"data-{i}"

    def say(self, text: str) -> None:
        rel = time.monotonic() - self.t0 if self.t0 else 0.0
        console.print(f"[dim][{rel:+7.1f}s][/] {text}")

    # -- start -----------------------------------------------------------------------------------
    def start(self) -> None:
        run_dir = self.config.run_dir
        neighbors = write_neighbors(run_dir / "neighbors.txt", self.pids.values())
        if self.config.secured:
            self.keys = run_dir / "keys"
            create_keys(list(self.pids.values()), self.keys)
        for i, pid in self.pids.items():
            cmd = PeerCommand(neighbors, self.output(i), PORT, self.net.address(i), keys=self.keys,
                              data=self.data(i) if self.config.durable else None).argv() + self.config.peer_args
            self.processes.start(i, PeerProcess(cmd, self.log(i), prefix=self.net.enter(str(i))))
            self.pending[i] = b""
        try:
            self.processes.wait_ready(timeout=START_LIMIT)
        except PeerExited as e:
            line = (e.process.log_text().strip().splitlines() or ["(no output)"])[-1]
            raise ConfigError(f"peer {e.key} exited at start ({e.process.returncode}): {line}") from None
        except NotReady:
            raise ConfigError(f"the peers did not start listening within {START_LIMIT:g} s (logs in {run_dir})") \
                from None
        everyone = set(self.pids.values())
        end = time.monotonic() + FORM_LIMIT
        while time.monotonic() < end:
            for out in self.outputs.values():
                out.update()
            if all(out.members == everyone for out in self.outputs.values()):
                return
            time.sleep(POLL)
        raise ConfigError(f"the group of {self.n} did not form within {FORM_LIMIT:g} s (logs in {run_dir})")

    # -- the run ---------------------------------------------------------------------------------
    def feed(self, i: int, now: float) -> None:
        if i in self.killed or i in self.exited or i in self.down:
            return
        due = min(self.messages, int((now - self.t0) * self.config.rate) + 1)
        if due > self.sent[i]:
            texts = self.workload[i][self.sent[i]:due]
            self.pending[i] += "".join(t + "\n" for t in texts).encode()
            self.fed_at[i] += [time.time()] * len(texts)
            self.sent[i] = due
        if self.pending[i]:
            written = self.processes[i].write_some(self.pending[i])  # 0: a paused peer's pipe is full
            if written is None:  # it reads no more
                self.pending[i] = b""
                return
            self.pending[i] = self.pending[i][written:]

    def apply(self, event: Event) -> None:
        a = event.action
        self.say(f"[bold yellow]{describe(a)}[/]")
        if isinstance(a, Partition):
            self.net.partition(a.sides)
        elif isinstance(a, Heal):
            self.net.heal()
        elif isinstance(a, LossOn):
            self.net.loss_on(a.key, a.probability, a.links)
        elif isinstance(a, LossOff):
            self.net.loss_off(a.key)
        elif isinstance(a, CutOneWay):
            self.net.cut_one_way(a.key, a.src, a.dst)
        elif isinstance(a, Pause):
            self.processes[a.peer].pause()
        elif isinstance(a, Resume):
            self.processes[a.peer].resume()
        elif isinstance(a, Kill):
            self.processes[a.peer].kill()
            self.killed.add(a.peer)
        elif isinstance(a, Restart):
            self.processes[a.peer].kill()
            self.down[a.peer] = time.time()
            self.pending[a.peer] = b""  # what its pipe held dies with it: fed again after what it accepted
        elif isinstance(a, StartAgain):
            self.start_again(a.peer)
        self.applied.append((time.time(), event))

    def start_again(self, i: int) -> None:
        """Peer ``i``, killed by a restart, runs its command line again; its feed goes on after the
        lines its data folder accepted (its own count, when that cannot be read)."""
        accepted = start_again(self.processes, i, self.data(i))
        if accepted is not None and accepted <= self.sent[i]:
            self.sent[i] = accepted
            del self.fed_at[i][accepted:]
        self.pending[i] = b""
        self.restarts.append({"peer": i, "killed": self.down.pop(i), "started": time.time(), "accepted": accepted})
        self.say(f"peer {i} had accepted {'?' if accepted is None else accepted} of its lines: its feed goes on "
                 f"after them")

    def survivors(self) -> list[int]:
        """The peers the lab did not kill and that did not exit on their own (a restarted one is one)."""
        return [i for i in self.pids if i not in self.killed and i not in self.exited]

    def one_view(self) -> bool:
        """Everything fed, nobody down for a restart, and every survivor's latest view holds exactly the
        survivors (a restarted peer's: a view installed since it started again)."""
        alive = self.survivors()
        group = {self.pids[i] for i in alive}
        since = {r["peer"]: r["started"] for r in self.restarts}
        return not self.down and all(
            self.sent[i] >= self.messages and not self.pending[i] and self.outputs[i].members == group
            and self.outputs[i].views[-1]["delivered_at"] >= since.get(i, 0.0) for i in alive)

    def send_markers(self) -> None:
        """The barrier: each survivor multicasts ``<pid> #end`` once the survivors are one group.
        Every survivor is a member when the markers are sent, so each must deliver all of them, and
        each origin's marker comes after all its workload (FIFO)."""
        for i in self.survivors():
            self.pending[i] += f"{self.pids[i]} {MARKER}\n".encode()
        self.markers_sent = True
        self.say("the survivors are one group: each multicasts its end marker")

    def complete(self) -> bool:
        """Every survivor delivered every survivor's end marker (and, by FIFO, what came before)."""
        alive = self.survivors()
        return self.markers_sent and all(self.pids[o] in self.outputs[i].markers for i in alive for o in alive)

    def drive(self) -> str:
        """Run the workload and the schedule; how it ended: complete, settled (nothing delivered for
        --settle seconds after the workload) or deadline."""
        self.workload = {i: make_workload([pid], self.messages, self.config.seed + i)[pid]
                         for i, pid in self.pids.items()}
        for i, texts in self.workload.items():
            (self.config.run_dir / f"workload-{i}.txt").write_text("".join(t + "\n" for t in texts))
        events = list(self.config.events)
        self.t0, self.wall0 = time.monotonic(), time.time()
        self.say(f"workload starts: {self.n} peers × {self.messages} messages at {self.config.rate:g}/s each")
        last_growth = report_at = time.monotonic()
        end_of_work = self.t0 + self.config.duration
        while True:
            now = time.monotonic()
            for i in self.pids:
                self.feed(i, now)
            while events and events[0].at <= now - self.t0:
                self.apply(events.pop(0))
            for i, proc in self.processes.items():
                if i not in self.killed and i not in self.exited and i not in self.down \
                        and proc.returncode is not None:
                    self.exited[i] = proc.returncode
                    self.say(f"[red]peer {i} exited with status {proc.returncode} "
                             f"({EXIT_MEANING.get(proc.returncode, '?')})[/]")
            if any([out.update() for out in self.outputs.values()]):  # every file read, no short cut
                last_growth = now
            if now >= report_at + 5:
                report_at = now
                self.say("delivered: " + "  ".join(f"{i}:{self.outputs[i].messages}" for i in self.pids))
            if now >= end_of_work and not events:
                if not self.markers_sent and self.one_view():
                    self.send_markers()
                if self.complete():
                    return "complete"
                if now - max(last_growth, end_of_work) >= self.config.settle:
                    return "settled"
                if now >= end_of_work + self.config.deadline:
                    return "deadline"
            if not self.survivors():
                return "no survivors"
            time.sleep(POLL)

    # -- stop ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Every peer stopped by its pid: SIGCONT (a paused one), SIGTERM, SIGKILL after STOP_LIMIT."""
        self.processes.stop()
        for out in self.outputs.values():
            out.update()

    # -- figures ---------------------------------------------------------------------------------
    def rel(self, wall: float) -> float:
        """Seconds after the workload started, for a wall-clock time of the output files."""
        return wall - self.wall0

    def report(self) -> None:
        """What the faults did: removals, restarts, time from each heal to one view, messages entered on
        each side of a partition and delivered across it after the heal (also kept in ``figures``)."""
        alive = [i for i in self.pids if i not in self.killed]
        removals: dict[str, tuple[float, set[int]]] = {}  # removed pid -> (first seen, by which peers)
        for i in alive:
            for view in self.outputs[i].views:
                for pid in view.get("removed", ()):
                    at, by = removals.get(pid, (float("inf"), set()))
                    removals[pid] = (min(at, view["delivered_at"]), by | {i})
        number = {pid: i for i, pid in self.pids.items()}
        ordered = sorted(removals.items(), key=lambda item: item[1][0])
        self.figures["removed"] = [{"peer": number.get(pid, pid), "at": round(self.rel(at), 3), "by": sorted(by)}
                                   for pid, (at, by) in ordered]
        console.print("removed from the group: " + (", ".join(
            f"peer {r['peer']} at {r['at']:+.1f}s by {','.join(map(str, r['by']))}"
            for r in self.figures["removed"]) or "nobody"))
        self.report_restarts()
        cuts = [(wall, e.action) for wall, e in self.applied if isinstance(e.action, (Partition, Heal))]
        self.figures["partitions"] = []
        for k, (cut_at, action) in enumerate(cuts):
            if not isinstance(action, Partition):
                continue
            healed_at = next((wall for wall, a in cuts[k + 1:] if isinstance(a, Heal)), None)
            figure: dict = {"at": round(self.rel(cut_at), 3), "healed_at": None, "heal_to_one_view": None,
                            "sides": [self._held(side, cut_at, healed_at) for side in action.sides]}
            for side in figure["sides"]:
                side["own_view_after"] = after = self._own_view(tuple(side["side"]), cut_at, healed_at)
                console.print(f"cut at {self.rel(cut_at):+.1f}s → side {','.join(map(str, side['side']))} "
                              + ("never in a view of its own (no primary component: it waits)" if after is None
                                 else f"in a view of its own after {after:.2f} s"))
            if healed_at is not None:
                figure["healed_at"] = round(self.rel(healed_at), 3)
                figure["heal_to_one_view"] = worst = self._heal_to_one_view(healed_at)
                console.print(f"heal at {self.rel(healed_at):+.1f}s → every peer not killed in one view: "
                              + ("never" if worst is None else "at once (they were one view already)" if worst == 0
                                 else f"after {worst:.2f} s"))
            for side in figure["sides"]:
                console.print(f"side {','.join(map(str, side['side']))}: {side['entered']} messages entered during "
                              f"the partition; {side['crossed']} delivered at every other live peer, "
                              f"{side['after_heal']} of them after the heal"
                              + (f" (the last {side['last_after_heal']:.2f} s after it)" if side["after_heal"] else ""))
            self.figures["partitions"].append(figure)
        self.figures["one_way_cuts"] = []
        for wall, e in self.applied:
            if isinstance(e.action, CutOneWay):
                a = e.action
                removal = self._removed_after(wall, {a.src, a.dst})
                self.figures["one_way_cuts"].append({"at": round(self.rel(wall), 3), "src": a.src, "dst": a.dst,
                                                     **({} if removal is None else removal)})
                console.print(f"one-way cut {a.src}>{a.dst} at {self.rel(wall):+.1f}s → "
                              + ("neither removed" if removal is None else f"peer {removal['removed']} removed "
                                 f"after {removal['after']:.2f} s (every other live peer)"))

    def report_restarts(self) -> None:
        """One line per restart: killed at, started again at, admitted again at (the first other peer
        to install the view that admitted it), events caught up, and whether its file holds the
        group's whole order; peers whose file does not go to ``broken_restarts``."""
        files = {i: records(self.output(i)) for i in self.pids if self.output(i).exists()}
        order = group_order(files.values())
        self.figures["restarts"] = []
        self.broken_restarts = []
        for r in self.restarts:
            i = r["peer"]
            own = files.get(i, [])
            seen = restart_seen(self.pids[i], r["started"], own, [recs for o, recs in files.items() if o != i])
            problem = whole_order_problem(own, order)
            if problem is not None:
                self.broken_restarts.append(i)
            admitted = None if seen.admitted is None else round(self.rel(seen.admitted), 3)
            self.figures["restarts"].append({"peer": i, "killed": round(self.rel(r["killed"]), 3),
                                             "started": round(self.rel(r["started"]), 3), "admitted": admitted,
                                             "accepted": r["accepted"], "caught_up": seen.caught_up,
                                             "whole_order": problem is None})
            console.print(f"restart of peer {i}: SIGKILL at {self.rel(r['killed']):+.1f}s, started again at "
                          f"{self.rel(r['started']):+.1f}s, "
                          + ("never admitted again" if admitted is None else f"admitted again at {admitted:+.1f}s")
                          + f", {seen.caught_up} event(s) caught up; "
                          + (f"its file holds the group's whole order ({len(order):,} messages, no gap, "
                             f"none twice)" if problem is None else f"[red]its file {problem}[/]"))

    def _until_every(self, peers: list[int], since: float, until: float | None, wanted) -> float | None:
        """Seconds from ``since`` until each of ``peers`` had installed a view (before ``until``) for
        which ``wanted(view)`` holds — the latest of them —, None if one never did (0 for no peer)."""
        worst = 0.0
        for i in peers:
            at = next((v["delivered_at"] for v in self.outputs[i].views
                       if since < v["delivered_at"] <= (until or float("inf")) and wanted(v)), None)
            if at is None:
                return None
            worst = max(worst, at - since)
        return round(worst, 3)

    def _own_view(self, side: tuple[int, ...], cut_at: float, healed_at: float | None) -> float | None:
        """Seconds from the cut until every live peer of ``side`` had installed a view of no peer of
        another side (before the heal), None if one never did: the view-change latency of a partition."""
        mine = {self.pids[i] for i in side}
        live = [i for i in side if i not in self.killed]
        return self._until_every(live, cut_at, healed_at, lambda v: set(v["members"]) <= mine) if live else None

    def _removed_after(self, cut_at: float, pair: set[int]) -> dict | None:
        """After a one-way cut between the peers of ``pair``: which of them the group removed, and how
        many seconds after the cut the last other live peer installed a view removing it."""
        for gone in sorted(pair):
            pid = self.pids[gone]
            others = [i for i in self.pids if i != gone and i not in self.killed]
            after = self._until_every(others, cut_at, None, lambda v: pid in v.get("removed", ()))
            if others and after is not None:
                return {"removed": gone, "after": after}
        return None

    def _heal_to_one_view(self, healed_at: float) -> float | None:
        """Seconds from the heal until every peer the lab did not kill had installed a view holding
        all of them (0: it already had one), None if one never did (a peer that exited never does)."""
        expected = [i for i in self.pids if i not in self.killed]
        group = {self.pids[i] for i in expected}

        def apart(i: int) -> bool:  # its view at the heal does not hold the whole group
            before = [v for v in self.outputs[i].views if v["delivered_at"] <= healed_at]
            return not (before and set(before[-1]["members"]) >= group)

        return self._until_every([i for i in expected if apart(i)], healed_at, None,
                                 lambda v: set(v["members"]) >= group)

    def write_timeline(self, how: str) -> Path:
        """``timeline.json`` in the run folder: the events as applied (seconds after the workload
        started, and wall-clock time as in the output files), how the run ended, the figures."""
        path = self.config.run_dir / "timeline.json"
        path.write_text(json.dumps({
            "workload_started": self.wall0,
            "peers": self.pids,
            "events": [{"at": round(wall - self.wall0, 3), "wall": wall, "what": describe(e.action)}
                       for wall, e in self.applied],
            "end": how,
            "figures": self.figures,
        }, indent=1))
        return path

    def _held(self, side: tuple[int, ...], cut_at: float, healed_at: float | None) -> dict:
        """Messages entered at ``side`` during the partition; how many every live peer of the other
        sides delivered; how many of those only after the heal, and the last how long after it."""
        others = [i for i in self.pids if i not in side and i not in self.killed]
        entered = crossed = after_heal = 0
        last = 0.0
        for i in side:
            if i in self.killed:
                continue
            pid = self.pids[i]
            for k, fed in enumerate(self.fed_at[i]):
                if not cut_at <= fed < (healed_at or float("inf")):
                    continue
                entered += 1
                seen = [self.outputs[o].delivered.get(pid, {}).get(k) for o in others]
                if not others or any(t is None for t in seen):
                    continue
                crossed += 1
                latest = max(t for t in seen if t is not None)
                if healed_at is not None and latest > healed_at:
                    after_heal += 1
                    last = max(last, latest - healed_at)
        return {"side": list(side), "entered": entered, "crossed": crossed, "after_heal": after_heal,
                "last_after_heal": round(last, 3)}


def message_key(rec: dict) -> tuple:
    """A message's place in the group's Lamport order: (view, clock, pid)."""
    return (rec["view"], rec["clock"], rec["pid"])


def group_order(files) -> list[tuple]:
    """The group's order of messages, from every output file: each message once, (view, clock, pid)
    sorted (the Lamport order, the lab's peers' only)."""
    return sorted({message_key(r) for recs in files for r in recs if r.get("kind") == "message"})


def whole_order_problem(recs: list[dict], order: list[tuple]) -> str | None:
    """What keeps the file ``recs`` from holding the whole of ``order`` start to end, each message
    once, its records numbered 1..n (None: nothing)."""
    gaps = [r for r in recs if r.get("kind") == "gap"]
    if gaps:
        return f"has {len(gaps)} gap record(s) (the first: {gaps[0].get('reason', 'no reason')})"
    mine = [message_key(r) for r in recs if r.get("kind") == "message"]
    if len(mine) != len(set(mine)):
        return f"holds {len(mine) - len(set(mine))} message(s) twice"
    if mine != order:
        at = next((k for k, (a, b) in enumerate(zip(mine, order)) if a != b), min(len(mine), len(order)))
        return (f"holds {len(mine):,} of the group's {len(order):,} messages; they differ from message {at + 1} "
                f"on (a gap, or another order)")
    if [r.get("index") for r in recs] != list(range(1, len(recs) + 1)):
        return "does not number its records 1..n"
    return None
