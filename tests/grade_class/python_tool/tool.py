"""TOM, the totally ordered multicast tool of SE424 recitation 11, in Python.

Written from the handout alone (not from TOM's code nor from the Java reference
peer): a static group read from a neighbors file, one Lamport clock, a pending
queue ordered by (clock, from) with ACK counters, delivery from the head of the
queue to an output file. Standard library only.

    python3 tool.py neighborsFilePath outputFilePath port

Threads as in the handout's figure 2, talking through blocking queues:
the UI thread (this one), the listening thread, the outgoing (sending) thread
and the incoming (processing) thread.

Wire: one TCP connection per frame, one line per connection:
    MESSAGE-<clock>-<from>-<text>
    ACK-<clock>-<from>
where <from> is this tool's `<ip>:<port>`. The neighbors file lists the whole
group, this tool included, and every frame goes to every member, this tool
included, so each member counts n ACKs per message (handout section 1.1).
"""

import queue
import re
import socket
import sys
import threading
import time

MENU = "Choose what to do:\n1. Send a new message:\n2. Print status\n3. Quit\n"
MESSAGE = re.compile(r"^MESSAGE-(\d+)-(.*?:\d+)-(.*)$")
ACK = re.compile(r"^ACK-(\d+)-(.+)$")
STOP = object()  # put on a queue to end the thread that takes from it


def comes_before(a, b):
    """The pending queue's order on (clock, from) keys: the smaller clock first;
    on a tie the smaller process identifier (from, compared as strings) first."""
    if a[0] != b[0]:
        return a[0] < b[0]
    return a[1] < b[1]


class Entry:
    """One line of the pending queue. text is None while the entry is only
    reserved by an ACK that came before its MESSAGE."""

    def __init__(self, clock, sender):
        self.clock = clock
        self.sender = sender
        self.text = None
        self.acks = 0

    def line(self):
        if self.text is None:
            return f"{self.acks} ACKs on (no MESSAGE yet) ACK-{self.clock}-{self.sender}"
        return f"{self.acks} ACKs on MESSAGE-{self.clock}-{self.sender}-{self.text}"


class PendingQueue:
    """The pending queue of section 1.2, with no I/O: frames go in, the
    messages that may be output come out, in order.

    Only the head may leave, when it has its MESSAGE and n ACKs; once it
    leaves, every ready entry behind it leaves too."""

    def __init__(self, n):
        self.n = n
        self.entries = {}  # (clock, from) -> Entry
        self.order = []  # the keys, sorted with comes_before

    def _insert(self, key):
        entry = Entry(*key)
        self.entries[key] = entry
        i = len(self.order)
        while i > 0 and comes_before(key, self.order[i - 1]):
            i -= 1
        self.order.insert(i, key)
        return entry

    def _ready(self, key):
        entry = self.entries[key]
        return entry.text is not None and entry.acks >= self.n

    def _pop(self, key):
        self.order.remove(key)
        return self.entries.pop(key)

    def on_message(self, clock, sender, text):
        key = (clock, sender)
        entry = self.entries.get(key)
        if entry is None:
            entry = self._insert(key)
        entry.text = text
        return self.take_ready()

    def on_ack(self, clock, sender):
        key = (clock, sender)
        entry = self.entries.get(key)
        if entry is None:
            # a premature ACK: reserve the entry, its MESSAGE fills it in later
            entry = self._insert(key)
        entry.acks += 1
        return self.take_ready()

    def take_ready(self):
        delivered = []
        while self.order and self._ready(self.order[0]):
            delivered.append(self._pop(self.order[0]))
        return delivered

    def lines(self):
        return [self.entries[key].line() for key in self.order]


def read_neighbors(path):
    """[(host, port)] in file order; blank lines and # comments skipped,
    duplicates ignored."""
    neighbors = []
    with open(path, encoding="utf-8") as f:
        for raw in f:
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            host, _, port = line.rpartition(":")
            address = (host, int(port))
            if address not in neighbors:
                neighbors.append(address)
    return neighbors


def local_addresses():
    addresses = ["0.0.0.0", "127.0.0.1"]
    try:
        for ip in socket.gethostbyname_ex(socket.gethostname())[2]:
            if ip not in addresses:
                addresses.append(ip)
    except OSError:
        pass
    return addresses


def say(text="", end="\n"):
    sys.stdout.write(text + end)
    sys.stdout.flush()


def ask(prompt=None):
    """One line from stdin, or None at its end. Without a terminal nothing
    echoes the answer, so the next printed line starts a line of its own."""
    if prompt is not None:
        say(prompt, end="")
    line = sys.stdin.readline()
    if not sys.stdin.isatty():
        say()
    if not line:
        return None
    return line.rstrip("\r\n")


class Tool:
    def __init__(self, neighbors, output_path, port):
        self.neighbors = neighbors
        self.port = port
        self.me = None
        self.clock = 0
        self.lock = threading.Lock()  # the clock, the pending queue, the output file
        self.pending = PendingQueue(len(neighbors))
        self.output = open(output_path, "a", encoding="utf-8")
        self.incoming = queue.Queue()
        self.outgoing = queue.Queue()
        self.server = None
        self.quitting = False

    # --- the listening thread ---
    def listen(self):
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return  # the server socket was closed: quitting
            with conn:
                conn.settimeout(5)
                data = b""
                try:
                    while not data.endswith(b"\n"):
                        chunk = conn.recv(4096)
                        if not chunk:
                            break
                        data += chunk
                except OSError:
                    pass
            line = data.decode("utf-8", errors="replace").rstrip("\r\n")
            if line:
                self.incoming.put(line)

    # --- the outgoing thread ---
    def send_all(self):
        while True:
            frame = self.outgoing.get()
            if frame is STOP:
                return
            for neighbor in self.neighbors:
                self.send_one(neighbor, frame)

    def send_one(self, neighbor, frame):
        tries = 5 if self.quitting else 50
        for _ in range(tries):
            try:
                with socket.create_connection(neighbor, timeout=5) as s:
                    s.sendall((frame + "\n").encode("utf-8"))
                return
            except OSError:
                time.sleep(0.2)
        print(f"could not send to {neighbor[0]}:{neighbor[1]}: {frame}", file=sys.stderr)

    # --- the incoming thread ---
    def process(self):
        while True:
            line = self.incoming.get()
            if line is STOP:
                return
            m = MESSAGE.match(line)
            if m:
                self.on_message(int(m.group(1)), m.group(2), m.group(3))
                continue
            m = ACK.match(line)
            if m:
                self.on_ack(int(m.group(1)), m.group(2))
                continue
            print(f"ignored bad line: {line}", file=sys.stderr)

    def on_message(self, clock, sender, text):
        with self.lock:
            self.clock = max(self.clock, clock) + 1
            # the ACK goes to everyone, this tool included
            self.outgoing.put(f"ACK-{clock}-{sender}")
            self.output_all(self.pending.on_message(clock, sender, text))

    def on_ack(self, clock, sender):
        with self.lock:
            self.output_all(self.pending.on_ack(clock, sender))

    def output_all(self, delivered):
        if self.output.closed:
            return
        for entry in delivered:
            self.output.write(entry.line() + "\n")
            self.output.flush()
            say(f"Delivered: {entry.line()}")

    # --- the UI thread ---
    def send_message(self, text):
        with self.lock:
            self.clock += 1
            frame = f"MESSAGE-{self.clock}-{self.me}-{text}"
            # to everyone, this tool included: it enters our pending queue when it comes back
            self.outgoing.put(frame)
        say(f"Ready to send: {frame}")

    def print_status(self):
        with self.lock:
            say(f"Logical clock time: {self.clock}")
            say("Pending messages:")
            for line in self.pending.lines():
                say(line)

    def choose_address(self):
        addresses = local_addresses()
        say("Choose an IP address to listen on :")
        for i, ip in enumerate(addresses):
            say(f"{i}: {ip}")
        while True:
            answer = ask()
            if answer is None:
                return None
            answer = answer.strip()
            if answer.isdigit() and int(answer) < len(addresses):
                return addresses[int(answer)]
            try:
                socket.inet_aton(answer)
                if answer.count(".") == 3:
                    return answer
            except OSError:
                pass
            say(f"Not an address: {answer!r}. Type its number or the IP address.")

    def start(self):
        say(f"Loaded {len(self.neighbors)} neighbors")
        ip = self.choose_address()
        if ip is None:
            return False
        from_ip = ip
        while from_ip == "0.0.0.0":
            from_ip = ask("Enter the IP address to write in the from field : ")
            if from_ip is None:
                return False
            from_ip = from_ip.strip() or "0.0.0.0"
        self.server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.server.bind((ip, self.port))
            self.server.listen(64)
        except OSError as e:
            print(f"cannot listen on {ip}:{self.port}: {e}", file=sys.stderr)
            return False
        say(f"Started to listen on {ip}:{self.port}")
        self.me = f"{from_ip}:{self.port}"
        say(f"Sending messages from: {self.me}")
        self.threads = [
            threading.Thread(target=self.listen, name="listener", daemon=True),
            threading.Thread(target=self.process, name="incoming", daemon=True),
            threading.Thread(target=self.send_all, name="outgoing", daemon=True),
        ]
        for thread in self.threads:
            thread.start()
        say("Started incoming messages processor.")
        say("Started outgoing messages processor.")
        return True

    def menu(self):
        while True:
            say(MENU, end="")
            choice = ask(": ")
            if choice is None or choice.strip() == "3":
                return
            choice = choice.strip()
            if choice == "1":
                text = ask("Enter the message to send : ")
                if text is None:
                    return
                self.send_message(text)
            elif choice == "2":
                self.print_status()
            elif choice:
                say(f"Unknown choice: {choice}")

    def quit(self):
        """Send what is already queued, then stop every thread."""
        self.quitting = True
        self.outgoing.put(STOP)
        self.threads[2].join(timeout=10)
        try:
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the listener's accept
        except OSError:
            pass
        self.server.close()
        self.incoming.put(STOP)
        self.threads[1].join(timeout=2)
        with self.lock:
            self.output.close()


def main(argv):
    if len(argv) != 3:
        print("usage: tool.py neighborsFilePath outputFilePath port", file=sys.stderr)
        return 2
    neighbors = read_neighbors(argv[0])
    tool = Tool(neighbors, argv[1], int(argv[2]))
    if not tool.start():
        return 1
    tool.menu()
    tool.quit()
    say("Bye.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
