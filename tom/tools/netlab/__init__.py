"""The network lab: a TOM group in network namespaces of its own, under a fault schedule.

``schedule`` parses the fault options into timed events (pure); ``bpf`` builds the classic-BPF
program of the random packet loss; ``network`` makes, rewires and removes the namespaces; ``run``
starts the peers in them, feeds the workload, applies the events, stops everything and verifies;
``__main__`` is the command line (``scripts/netlab``). See docs/netlab.md.
"""
