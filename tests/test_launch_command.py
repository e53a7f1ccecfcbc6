"""The launch script's peer command lines: durable peers keep their data folder in the run folder."""

from pathlib import Path

from tom.tools.launch import peer_command, takes_data


def test_a_durable_peer_gets_its_own_data_folder_in_the_run_folder():
    run = Path("runs/x")
    argv = peer_command(run / "neighbors.txt", run / "out-5001.jsonl", "127.0.0.1:5001", 0.0, True, durable=True)
    assert argv[argv.index("--data") + 1] == str(run / "data-5001")
    assert "--data" not in peer_command(run / "neighbors.txt", run / "out-5001.jsonl", "127.0.0.1:5001", 0.0, True)


def test_every_order_on_toms_wire_takes_data_and_the_handout_wire_none():
    assert takes_data("lamport", "tom") and takes_data("sequencer", "tom") and takes_data("causal", "tom")
    assert not takes_data("lamport", "handout")
