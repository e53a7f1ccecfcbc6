"""TOM: totally-ordered multicast between peers with Lamport clocks."""

__version__ = "0.1.0"
