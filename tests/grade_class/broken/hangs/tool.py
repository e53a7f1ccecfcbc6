"""A broken submission: it starts like the handout's figure 1, then hangs.

It loads the neighbors, lists the addresses, reads the choice, prints the start-up lines and the menu,
and binds its port but never accepts a connection, never reads the menu again, never quits (not on 3,
not at the end of stdin) and ignores SIGTERM, SIGINT and SIGHUP: a grader must stop it by force.
"""

import signal
import socket
import sys
import time

for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(sig, signal.SIG_IGN)

neighbors_path, output_path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(neighbors_path, encoding="utf-8") as f:
    count = sum(1 for line in f if line.strip() and not line.startswith("#"))
print(f"Loaded {count} neighbors")
print("Choose an IP address to listen on :")
print("0: 0.0.0.0")
print("1: 127.0.0.1", flush=True)
answer = sys.stdin.readline().strip()
ip = "127.0.0.1" if answer in ("", "1") else answer
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind((ip, port))
server.listen(64)  # and never accept
print(f"Started to listen on {ip}:{port}")
print(f"Sending messages from: {ip}:{port}")
print("Started incoming messages processor.")
print("Started outgoing messages processor.")
print("Choose what to do:\n1. Send a new message:\n2. Print status\n3. Quit")
print(": ", end="", flush=True)
while True:  # stuck, as a deadlocked tool would be
    time.sleep(3600)
