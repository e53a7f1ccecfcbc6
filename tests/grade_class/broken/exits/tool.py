"""A broken submission: it exits with status 1 at once, before printing anything to stdout."""

import sys

print("error: could not start", file=sys.stderr)
sys.exit(1)
