"""The link handshake on in-memory streams, plain and secured: who is let in, as whom, and when."""

import datetime
import ssl

import pytest
import trio
import trio.testing

from tom.errors import ConfigError
from tom.net.handshake import (TLS_REQUIRED, OrderMismatch, PlaintextRefused, Rejected, TlsNotConfigured, WireMismatch,
                           accept, connect)
from tom.net.keys import (GroupKeys, _context, _read_cert, _read_key, create_keys, load_group_keys, make_peer_cert,
                      write_peer)
from tom.net.links import Link
from tom.net.listener import listener
from tom.net.tlsstream import TlsSocketStream

from linkfill import push_until_blocked

DIALER, LISTENER, OTHER = "127.0.0.1:5000", "127.0.0.1:5001", "127.0.0.1:4999"
PIDS = [OTHER, DIALER, LISTENER]


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    folder = tmp_path_factory.mktemp("keys")
    create_keys(PIDS, folder)
    return folder


@pytest.fixture(scope="module")
def strangers(tmp_path_factory):
    """Another group's CA, with certificates for the very same pids."""
    folder = tmp_path_factory.mktemp("strangers")
    create_keys(PIDS, folder)
    return folder


async def run_pair(dialer_keys, listener_keys, links=None, dialer_pid=DIALER, dialled=LISTENER,
                   orders=("lamport", "lamport")):
    """Run `connect` and `accept` against each other; return (dialer outcome, listener outcome), each the
    result or the exception raised."""
    ours, theirs = trio.testing.memory_stream_pair()
    links = links if links is not None else {DIALER: Link(DIALER), OTHER: Link(OTHER)}
    out = {}

    async def side(name, fn):
        try:
            with trio.fail_after(10):
                out[name] = await fn()
        except Exception as e:  # the outcome under test
            out[name] = e
        finally:
            await trio.aclose_forcefully(ours if name == "dialer" else theirs)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(side, "dialer", lambda: connect(ours, Link(dialled), dialer_pid, 7, dialer_keys,
                                                           orders[0]))
        nursery.start_soon(side, "listener", lambda: accept(theirs, LISTENER, 9, links, listener_keys, orders[1]))
    return out["dialer"], out["listener"]


async def test_members_meet_over_tls_and_frames_flow(group):
    links = {DIALER: Link(DIALER)}
    ours, theirs = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        got = {}

        async def listen():
            got["l"] = await accept(theirs, LISTENER, 9, links, load_group_keys(group, LISTENER))

        nursery.start_soon(listen)
        stream, reader, has = await connect(ours, Link(LISTENER), DIALER, 7, load_group_keys(group, DIALER))
    link, lstream, lreader, lhas = got["l"]
    assert (link.pid, link.incarnation, has, lhas) == (DIALER, 7, 0, 0)
    assert isinstance(stream, trio.SSLStream) and stream.version() == "TLSv1.3"
    await stream.send_all(b"MESSAGE-1-127.0.0.1:5000-hi\n")
    assert await lreader.chunk() == ["MESSAGE-1-127.0.0.1:5000-hi"]


async def test_plain_handshake_still_works():
    dialer, listener = await run_pair(None, None)
    assert not isinstance(dialer, Exception) and not isinstance(listener, Exception), (dialer, listener)
    assert listener[0].pid == DIALER and listener[0].incarnation == 7


@pytest.mark.parametrize("secured", [False, True])
async def test_peers_of_different_orders_refuse_each_other_with_one_line_each(group, secured):
    keys = (load_group_keys(group, DIALER), load_group_keys(group, LISTENER)) if secured else (None, None)
    links = {DIALER: Link(DIALER)}
    dialer, listener = await run_pair(*keys, links=links, orders=("sequencer", "lamport"))
    assert isinstance(dialer, OrderMismatch) and isinstance(listener, OrderMismatch), (dialer, listener)
    assert str(dialer) == f"{LISTENER} runs the lamport order, this peer the sequencer order: connection refused"
    assert str(listener) == f"{DIALER} runs the sequencer order, this peer the lamport order: connection refused"
    assert links[DIALER].mismatch == str(listener) and links[DIALER].incarnation is None  # the link untouched
    dialer, listener = await run_pair(*keys, orders=("causal", "causal"))
    assert not isinstance(dialer, Exception) and not isinstance(listener, Exception), (dialer, listener)


@pytest.mark.parametrize("order, wire", [("lamport", 1), ("causal", 1), ("lamport", 2), ("causal", 2),
                                         ("sequencer", 1)])
async def test_a_peer_of_an_older_wire_is_refused_with_one_line_each_way(order, wire):
    """An older TOM (wire 1: an ACK per message; wire 2: cumulative ACKs, no runs of messages)
    announces its order without ``runs``: a peer of wire 3 refuses it whichever side dials, with one
    line; the older peer gets our HELLO, whose order word it does not know, and refuses with its own
    order-mismatch line."""
    word = {1: "", 2: "cumulative"}[wire]
    old_hello = (b"HELLO-127.0.0.1:5000-7\n" if (order, wire) == ("lamport", 1)
                 else f"HELLO-127.0.0.1:5000-7-{order}{word}\n".encode())
    ours, theirs = trio.testing.memory_stream_pair()
    links = {DIALER: Link(DIALER)}
    with trio.fail_after(10):
        await ours.send_all(old_hello)
        with pytest.raises(WireMismatch) as refused:
            await accept(theirs, LISTENER, 9, links, None, order)
        answer = await ours.receive_some(4096)
    assert str(refused.value) == (f"{DIALER} speaks wire protocol v{wire} of the {order} order, this peer v3 "
                                  f"(every peer of a group needs a TOM that speaks the same wire): connection refused")
    assert links[DIALER].mismatch == str(refused.value)
    assert answer.startswith(f"HELLO-{LISTENER}-9-{order}runs\nREFUSED-".encode())

    ours, theirs = trio.testing.memory_stream_pair()  # now the new peer dials the old one
    with trio.fail_after(10):
        await theirs.send_all(old_hello.replace(DIALER.encode(), LISTENER.encode()) + b"RESUME-0\n")
        with pytest.raises(WireMismatch) as refused:
            await connect(ours, Link(LISTENER), DIALER, 7, None, order)
    assert str(refused.value).startswith(f"{LISTENER} speaks wire protocol v{wire} of the {order} order, this peer v3")


async def test_every_order_speaks_wire_3():
    """Runs of messages are every order's: a sequencer peer of this TOM takes a sequencer HELLO of wire 3."""
    ours, theirs = trio.testing.memory_stream_pair()
    with trio.fail_after(10):
        await ours.send_all(b"HELLO-127.0.0.1:5000-7-sequencerruns\nRESUME-0\n")
        link, *_ = await accept(theirs, LISTENER, 9, {DIALER: Link(DIALER)}, None, "sequencer")
    assert link.incarnation == 7


async def test_a_certificate_from_another_ca_is_refused_both_ways(group, strangers):
    dialer, listener = await run_pair(load_group_keys(strangers, DIALER), load_group_keys(group, LISTENER))
    assert isinstance(listener, Rejected) and "TLS handshake failed" in str(listener), listener
    assert isinstance(dialer, Exception)
    dialer, listener = await run_pair(load_group_keys(group, DIALER), load_group_keys(strangers, LISTENER))
    assert isinstance(dialer, Rejected) and "certificate rejected" in str(dialer), dialer
    assert isinstance(listener, Exception)


async def test_a_member_cannot_speak_as_another(group):
    """OTHER's certificate, a HELLO claiming DIALER: refused, and DIALER's live link is not touched."""
    live, _ = trio.testing.memory_stream_pair()
    links = {DIALER: Link(DIALER), OTHER: Link(OTHER)}
    links[DIALER].attach(live, 0, 0.0)
    dialer, listener = await run_pair(load_group_keys(group, OTHER), load_group_keys(group, LISTENER), links,
                                      dialer_pid=DIALER)
    assert isinstance(listener, Rejected) and listener.kind == "identity", listener
    assert "HELLO as 127.0.0.1:5000 with the certificate of 127.0.0.1:4999" in str(listener)
    assert links[DIALER].stream is live and links[DIALER].incarnation is None


async def test_the_dialer_checks_whom_it_reached(group):
    """We dial LISTENER, and the one answering holds OTHER's certificate: our HELLO is never sent."""
    ours, theirs = trio.testing.memory_stream_pair()
    seen = bytearray()

    async def impostor():
        tls = trio.SSLStream(theirs, load_group_keys(group, OTHER).server, server_side=True)
        try:
            await tls.do_handshake()
            while data := await tls.receive_some():
                seen.extend(data)
        except trio.BrokenResourceError:
            pass

    async with trio.open_nursery() as nursery:
        nursery.start_soon(impostor)
        with pytest.raises(Rejected, match="certificate of 127.0.0.1:4999"):
            await connect(ours, Link(LISTENER), DIALER, 7, load_group_keys(group, DIALER))
        await ours.aclose()
    assert b"HELLO" not in seen


async def test_an_expired_certificate_is_refused(group, tmp_path):
    long_ago = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=400)
    ca_cert, ca_key = _read_cert(group / "ca.pem", "ca"), _read_key(group / "ca.key", "ca key")
    cert, key = make_peer_cert(DIALER, ca_cert, ca_key, days=30, now=long_ago)
    (tmp_path / "ca.pem").write_bytes((group / "ca.pem").read_bytes())
    write_peer(tmp_path, DIALER, cert, key)
    with pytest.raises(ConfigError, match="valid only from"):
        load_group_keys(tmp_path, DIALER)  # at start-up: one line
    files = (group / "ca.pem", tmp_path / "127.0.0.1_5000.pem", tmp_path / "127.0.0.1_5000.key")
    old = GroupKeys(DIALER, _context(ssl.PROTOCOL_TLS_SERVER, *files), _context(ssl.PROTOCOL_TLS_CLIENT, *files))
    dialer, listener = await run_pair(old, load_group_keys(group, LISTENER))
    assert isinstance(listener, Rejected) and "expired" in str(listener), listener


async def test_plaintext_meets_a_secured_listener(group):
    """A plaintext HELLO gets the one refusal line; the plaintext dialer stops with a ConfigError."""
    dialer, listener = await run_pair(None, load_group_keys(group, LISTENER))
    assert isinstance(listener, Rejected) and listener.kind == "plaintext"
    assert isinstance(dialer, PlaintextRefused) and isinstance(dialer, ConfigError)


async def test_tls_meets_a_plaintext_listener(group):
    dialer, listener = await run_pair(load_group_keys(group, DIALER), None)
    assert isinstance(listener, TlsNotConfigured)
    assert isinstance(dialer, Rejected) and "without --keys" in str(dialer), dialer


async def test_forged_lines_reach_nothing_on_a_secured_listener(group):
    """HELLO lines and frames in clear: refused before any is parsed; no link changes."""
    ours, theirs = trio.testing.memory_stream_pair()
    live, _ = trio.testing.memory_stream_pair()
    links = {DIALER: Link(DIALER)}
    links[DIALER].attach(live, 0, 0.0)
    links[DIALER].meet(42)
    await ours.send_all(b"HELLO-127.0.0.1:5000-43\nRESUME-0\nMESSAGE-9-127.0.0.1:5000-INJECTED\n")
    with pytest.raises(Rejected):
        await accept(theirs, LISTENER, 9, links, load_group_keys(group, LISTENER))
    assert await ours.receive_some() == TLS_REQUIRED
    assert links[DIALER].stream is live and links[DIALER].incarnation == 42


def test_load_refuses_wrong_files(group, strangers, tmp_path):
    with pytest.raises(ConfigError, match="keys folder not found"):
        load_group_keys(tmp_path / "none", DIALER)
    with pytest.raises(ConfigError, match="certificate of 127.0.0.1:6000 not found"):
        load_group_keys(group, "127.0.0.1:6000")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    (mixed / "ca.pem").write_bytes((group / "ca.pem").read_bytes())
    for suffix in (".pem", ".key"):  # a certificate from the other group
        (mixed / f"127.0.0.1_5000{suffix}").write_bytes((strangers / f"127.0.0.1_5000{suffix}").read_bytes())
    (mixed / "127.0.0.1_5000.key").chmod(0o600)
    with pytest.raises(ConfigError, match="not issued by the group CA"):
        load_group_keys(mixed, DIALER)
    (mixed / "127.0.0.1_5001.pem").write_bytes((group / "127.0.0.1_5000.pem").read_bytes())  # another pid's
    (mixed / "127.0.0.1_5001.key").write_bytes((group / "127.0.0.1_5000.key").read_bytes())
    (mixed / "127.0.0.1_5001.key").chmod(0o600)
    with pytest.raises(ConfigError, match="for 127.0.0.1:5000, not for 127.0.0.1:5001"):
        load_group_keys(mixed, LISTENER)
    (mixed / "127.0.0.1_5000.key").chmod(0o644)
    with pytest.raises(ConfigError, match="readable by others"):
        load_group_keys(mixed, DIALER)
    (mixed / "127.0.0.1_5000.key").write_text("not a key")
    (mixed / "127.0.0.1_5000.key").chmod(0o600)
    with pytest.raises(ConfigError, match="not an unencrypted PEM private key"):
        load_group_keys(mixed, DIALER)


async def test_over_real_sockets_tls_is_done_by_the_socket_stream(group):
    """On TCP sockets the TLS runs in `TlsSocketStream` (OpenSSL on the socket): a 4 MB burst (the writer
    waits for the socket many times) arrives whole and in order; a closed side reads as the end."""
    (lst,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = lst.socket.getsockname()[1]
    links = {DIALER: Link(DIALER)}
    burst = b"".join(f"MESSAGE-{i}-127.0.0.1:5000-{'x' * 40}\n".encode() for i in range(70000))
    got = bytearray()
    async with lst, trio.open_nursery() as nursery:
        async def serve():
            raw = await lst.accept()
            link, stream, reader, _ = await accept(raw, LISTENER, 9, links, load_group_keys(group, LISTENER))
            assert isinstance(stream, TlsSocketStream) and link.pid == DIALER
            got.extend(reader.pending)
            while data := await stream.receive_some(65536):
                got.extend(data)
            await stream.aclose()

        nursery.start_soon(serve)
        raw = await trio.open_tcp_stream("127.0.0.1", port)
        stream, _, _ = await connect(raw, Link(LISTENER), DIALER, 7, load_group_keys(group, DIALER))
        assert isinstance(stream, TlsSocketStream) and stream.version() == "TLSv1.3"
        with trio.fail_after(30):
            await stream.send_all(burst)
            await stream.aclose()
    assert bytes(got) == burst
    with pytest.raises(trio.ClosedResourceError):
        await stream.send_all(b"x")


async def test_a_plain_peer_with_no_link_up_stops_when_a_secured_group_dials_it(group):
    """Its listener sees a TLS handshake while no neighbor is connected: a ConfigError, one line."""
    (lst,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    tx, _rx = trio.open_memory_channel(10)
    with pytest.raises(BaseExceptionGroup) as info:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(listener, [lst], LISTENER, 9, {DIALER: Link(DIALER)}, tx, None)
            raw = await trio.open_tcp_stream("127.0.0.1", port)
            with trio.fail_after(10):
                try:
                    await connect(raw, Link(LISTENER), DIALER, 7, load_group_keys(group, DIALER))
                except Rejected:
                    pass
                await trio.sleep_forever()
    assert info.group_contains(ConfigError, match="the group is secured; start this peer with --keys")


async def test_over_tls_a_due_batch_is_written_at_once_and_a_blocked_one_goes_whole_to_the_writer(group):
    """`Link.push_many` writes a due batch on an idle TLS link at once (`TlsSocketStream.send_nowait`);
    once the socket is full, the batch it did not take is queued and the writer sends it first (OpenSSL
    wants the same bytes again): every byte arrives once, in order."""
    (lst,) = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = lst.socket.getsockname()[1]
    links = {DIALER: Link(DIALER)}
    got, sent = bytearray(), []
    async with lst, trio.open_nursery() as nursery:
        ready = trio.Event()
        box = {}

        async def serve():
            raw = await lst.accept()
            _, stream, reader, _ = await accept(raw, LISTENER, 9, links, load_group_keys(group, LISTENER))
            box["stream"], box["reader"] = stream, reader
            ready.set()

        nursery.start_soon(serve)
        raw = await trio.open_tcp_stream("127.0.0.1", port)
        stream, _, _ = await connect(raw, Link(LISTENER), DIALER, 7, load_group_keys(group, DIALER))
        await ready.wait()
        link = Link(LISTENER)
        link.attach(stream, 0, trio.current_time())
        first = [b"ACK-1-127.0.0.1:5000\n"]
        now = trio.current_time()
        link.push_many(now, first, now)  # no writer runs: written at once
        assert not link.buffer and link.frames_out == 1
        sent += first + push_until_blocked(link)  # the rest waits for the writer
        want = len(b"".join(sent))
        with trio.fail_after(30):
            nursery.start_soon(link.writer)
            got.extend(box["reader"].pending)
            while len(got) < want:
                got.extend(await box["stream"].receive_some(1 << 20))
        nursery.cancel_scope.cancel()
    assert bytes(got) == b"".join(sent)
    assert link.frames_out == len(sent)


async def knock_pair(knocker_keys, listener_keys, links):
    """`knock` from LISTENER's larger neighbor DIALER... reversed: the knocker is the larger pid."""
    from tom.net.handshake import knock
    ours, theirs = trio.testing.memory_stream_pair()
    out = {}

    async def side(name, fn, stream):
        try:
            with trio.fail_after(10):
                out[name] = await fn()
        except Exception as e:  # the outcome under test
            out[name] = e
        finally:
            await trio.aclose_forcefully(stream)

    async with trio.open_nursery() as nursery:
        # LISTENER (5001) knocks at DIALER (5000): the smaller pid, which dials it
        nursery.start_soon(side, "knocker", lambda: knock(ours, Link(DIALER), LISTENER, 7, knocker_keys), ours)
        nursery.start_soon(side, "listener", lambda: accept(theirs, DIALER, 9, links, listener_keys), theirs)
    return out["knocker"], out["listener"]


@pytest.mark.parametrize("secured", [False, True])
async def test_a_larger_neighbor_that_knocks_ends_the_back_off_of_the_dial_to_it(group, secured, autojump_clock):
    from tom.net.handshake import Knocked
    link = Link(LISTENER)
    links = {LISTENER: link, OTHER: Link(OTHER)}
    waited = {}

    async def dialer_backing_off():
        start = trio.current_time()
        await link.back_off(2.0)
        waited["s"] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(dialer_backing_off)
        await trio.sleep(0.3)
        keys = (load_group_keys(group, LISTENER), load_group_keys(group, DIALER)) if secured else (None, None)
        knocker, accepted = await knock_pair(keys[0], keys[1], links)
    assert knocker is None and isinstance(accepted, Knocked)
    assert waited["s"] == pytest.approx(0.3, abs=0.05)  # not the 2 s back-off (a mock clock)
    assert link.state == "down" and link.incarnation is None  # nothing else of the link touched
    start = trio.current_time()
    await link.back_off(2.0)  # (a knock ends one back-off, not the next)
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_a_knock_from_a_stranger_or_a_smaller_pid_is_still_refused():
    links = {DIALER: Link(DIALER), OTHER: Link(OTHER)}
    from tom.net.handshake import knock
    ours, theirs = trio.testing.memory_stream_pair()
    async with trio.open_nursery() as nursery:
        out = {}

        async def listen():
            try:
                await accept(theirs, LISTENER, 9, links, None)
            except Exception as e:
                out["l"] = e

        nursery.start_soon(listen)
        with trio.fail_after(10):
            await knock(ours, Link(LISTENER), "127.0.0.1:6000", 7, None)  # not in LISTENER's neighbors file
    assert isinstance(out["l"], Rejected) and "not in" in str(out["l"])
