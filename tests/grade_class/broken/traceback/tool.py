"""A broken submission: it asks which address to listen on, then raises on the answer.

The bug is a student's: the typed choice (a string) indexes the list of addresses, so Python raises
TypeError with a traceback and the process exits with status 1 before it listens.
"""

import sys

neighbors_path, output_path, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(neighbors_path, encoding="utf-8") as f:
    neighbors = [line.strip() for line in f if line.strip() and not line.startswith("#")]
print(f"Loaded {len(neighbors)} neighbors")
addresses = ["0.0.0.0", "127.0.0.1"]
print("Choose an IP address to listen on :")
for i, ip in enumerate(addresses):
    print(f"{i}: {ip}")
sys.stdout.flush()
choice = sys.stdin.readline().strip()
ip = addresses[choice]  # TypeError: list indices must be integers or slices, not str
print(f"Started to listen on {ip}:{port}")
