"""The launcher's one URL for a group: every peer's --http address, and a closed group's token."""

from urllib.parse import parse_qs, urlsplit

from tom.tools.launch import group_url, peer_command

PEERS = ["127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:5002"]


def test_one_url_names_every_peer_and_each_peer_serves_on_its_port_plus_the_offset(tmp_path):
    url = urlsplit(group_url(PEERS, 3000))
    assert url.netloc == "127.0.0.1:8000" and url.fragment == ""
    assert parse_qs(url.query)["peers"] == ["127.0.0.1:8000,127.0.0.1:8001,127.0.0.1:8002"]
    cmd = peer_command(tmp_path / "n", tmp_path / "o", PEERS[1], 0.0, True, http_offset=3000)
    assert cmd[cmd.index("--http") + 1] == "127.0.0.1:8001"
    assert "--http" not in peer_command(tmp_path / "n", tmp_path / "o", PEERS[1], 0.0, True)


def test_a_closed_groups_url_carries_the_token_of_its_keys_folder(tmp_path):
    url = urlsplit(group_url(PEERS, 3000, keys=tmp_path))
    token = (tmp_path / "api-token").read_text().strip()
    assert url.fragment == f"token={token}" and len(token) >= 32
    assert urlsplit(group_url(PEERS, 3000, keys=tmp_path)).fragment == url.fragment  # the same token again


def test_step_mode_goes_to_every_peer_and_needs_the_dashboard(tmp_path, capsys):
    from tom.tools.launch import main

    cmd = peer_command(tmp_path / "n", tmp_path / "o", PEERS[1], 0.0, False, http_offset=3000, step=True)
    assert "--step" in cmd and "--http" in cmd
    assert "--step" not in peer_command(tmp_path / "n", tmp_path / "o", PEERS[1], 0.0, False, http_offset=3000)
    neighbors = tmp_path / "three.txt"
    neighbors.write_text("\n".join(PEERS) + "\n")
    for extra in (["--messages", "3"], ["--no-http"], ["--wire", "handout"]):
        assert main([str(neighbors), "--step", "--runs", str(tmp_path / "runs"), *extra]) == 2
        assert "--step is for a group stepped by hand" in capsys.readouterr().err.replace("\n", " ")
    assert not (tmp_path / "runs").exists()  # refused before anything was made
