"""`tom keys`: the group's credentials on disk — created, completed on a re-run, replaced with --force."""

import stat

from tom.cli import main
from tom.net.keys import load_group_keys


def test_keys_are_made_once_completed_later_and_replaced_on_force(tmp_path, capsys):
    nb, keys = tmp_path / "nb.txt", tmp_path / "keys"
    nb.write_text("127.0.0.1:5000\n127.0.0.1:5001\n")
    assert main(["keys", str(nb), str(keys)]) == 0
    assert stat.S_IMODE(keys.stat().st_mode) == 0o700
    for name in ("ca.key", "127.0.0.1_5000.key", "127.0.0.1_5001.key"):
        assert stat.S_IMODE((keys / name).stat().st_mode) == 0o600, name
    first = (keys / "127.0.0.1_5000.pem").read_bytes()
    ca = (keys / "ca.pem").read_bytes()

    nb.write_text("127.0.0.1:5000\n127.0.0.1:5001\n127.0.0.1:5002\n")
    assert main(["keys", str(nb), str(keys)]) == 0
    out = capsys.readouterr().out
    assert "127.0.0.1:5002: " in out and out.count("(kept)") == 2
    assert (keys / "127.0.0.1_5000.pem").read_bytes() == first and (keys / "ca.pem").read_bytes() == ca
    load_group_keys(keys, "127.0.0.1:5002")  # the added peer belongs to the same group

    assert main(["keys", str(nb), str(keys), "--force"]) == 0
    assert (keys / "ca.pem").read_bytes() != ca and (keys / "127.0.0.1_5000.pem").read_bytes() != first
    for port in (5000, 5001, 5002):
        load_group_keys(keys, f"127.0.0.1:{port}")


def test_keys_without_the_ca_key_cannot_grow(tmp_path, capsys):
    nb, keys = tmp_path / "nb.txt", tmp_path / "keys"
    nb.write_text("127.0.0.1:5000\n")
    assert main(["keys", str(nb), str(keys)]) == 0
    (keys / "ca.key").unlink()
    nb.write_text("127.0.0.1:5000\n127.0.0.1:5001\n")
    assert main(["keys", str(nb), str(keys)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ca.key: missing" in err[0]
