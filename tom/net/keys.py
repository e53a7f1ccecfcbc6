"""A closed group's credentials: a group CA and, per peer, a certificate naming its pid and its key.

Layout of a keys folder (``tom keys NEIGHBORS DIR``)::

    ca.pem                  the group CA's certificate: every peer trusts exactly this CA
    ca.key                  the CA's private key: only needed to add peers later (keep it off the peers)
    <host>_<port>.pem       a peer's certificate, signed by the CA
    <host>_<port>.key       that peer's private key

Invariants:

* a peer certificate names its pid in a URI SubjectAltName ``tom://<pid>`` (and in its CN, for people
  reading it); a connection is accepted only from a certificate that chains to ``ca.pem`` and whose URI
  names the pid its HELLO claims (`cert_pid` reads it back from a verified peer certificate);
* private keys are written 0600 in a 0700 folder, and a key readable by others is refused at load;
* `load_group_keys` checks everything it can before the peer binds a port (files present and readable,
  own certificate for this pid, issued by the CA, in its validity period, matching its key): each
  problem is one ConfigError line.

The X.509 work is done by `cryptography` (key generation, signing, parsing); the TLS by the standard
`ssl` module. Keys are ECDSA P-256: small, and the cheapest signatures for TLS 1.3 handshakes.
"""

from __future__ import annotations

import datetime
import os
import ssl
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from ..errors import ConfigError
from ..codec.pid import parse_pid

CA_CERT, CA_KEY = "ca.pem", "ca.key"
URI_PREFIX = "tom://"
DEFAULT_DAYS = 825


def file_stem(pid: str) -> str:
    """The file name (without suffix) of ``pid``'s certificate and key: ``127.0.0.1_5000``."""
    return pid.replace(":", "_")


def pid_uri(pid: str) -> str:
    return URI_PREFIX + pid


# -- creating --------------------------------------------------------------------------------------


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write ``data`` to ``path`` with ``mode``, atomically (a reader never sees half a file)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_ca(name: str, days: int = 3650, now: datetime.datetime | None = None
            ) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA certificate and its key."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def make_peer_cert(pid: str, ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, days: int = DEFAULT_DAYS,
                   now: datetime.datetime | None = None) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A certificate naming ``pid`` (URI SAN ``tom://pid``, CN ``pid``), signed by the CA, and its key.
    It serves both ends of a link (server and client authentication)."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    key = _new_key()
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, pid)]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=days))
            .add_extension(x509.SubjectAlternativeName([x509.UniformResourceIdentifier(pid_uri(pid))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH,
                                                  x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def write_peer(folder: Path, pid: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> None:
    stem = file_stem(pid)
    _write(folder / f"{stem}.key", _key_pem(key), 0o600)
    _write(folder / f"{stem}.pem", cert.public_bytes(serialization.Encoding.PEM), 0o644)


def create_keys(pids: list[str], folder: Path, force: bool = False, days: int = DEFAULT_DAYS) -> list[str]:
    """Make sure ``folder`` holds the group CA and a certificate and key for every pid; return the pids
    whose credentials were created now. Existing ones are kept, unless ``force``: then the folder's
    credentials are replaced by a new CA and new certificates for ``pids``."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"{folder}: cannot create the keys folder ({e.strerror or e})") from None
    if not folder.is_dir():
        raise ConfigError(f"{folder}: not a folder")
    ca_pem, ca_key_path = folder / CA_CERT, folder / CA_KEY
    try:
        if force:
            for f in folder.iterdir():
                if f.name in (CA_CERT, CA_KEY) or (f.suffix in (".pem", ".key") and _is_pid_stem(f.stem)):
                    f.unlink()
        if ca_pem.exists() or ca_key_path.exists():
            ca_cert = _read_cert(ca_pem, "CA certificate")
            if not ca_key_path.exists():
                raise ConfigError(f"{ca_key_path}: missing, so no peer can be added (--force starts over)")
            ca_key = _read_key(ca_key_path, "CA key")
            if ca_cert.public_key() != ca_key.public_key():
                raise ConfigError(f"{ca_key_path} is not the key of {ca_pem} (--force starts over)")
        else:
            ca_cert, ca_key = make_ca(f"TOM group CA ({folder.resolve().name})")
            _write(ca_key_path, _key_pem(ca_key), 0o600)
            _write(ca_pem, ca_cert.public_bytes(serialization.Encoding.PEM), 0o644)
        created = []
        for pid in pids:
            stem = file_stem(pid)
            if (folder / f"{stem}.pem").exists() and (folder / f"{stem}.key").exists():
                continue
            cert, key = make_peer_cert(pid, ca_cert, ca_key, days)
            write_peer(folder, pid, cert, key)
            created.append(pid)
        return created
    except OSError as e:
        raise ConfigError(f"{folder}: cannot write the keys ({e.strerror or e})") from None


def _is_pid_stem(stem: str) -> bool:
    host, sep, port = stem.rpartition("_")
    return bool(sep and host and port.isdigit())


# -- loading ---------------------------------------------------------------------------------------


def _read(path: Path, what: str) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: {what} not found (create the group's keys with: tom keys NEIGHBORS DIR)") \
            from None
    except OSError as e:
        raise ConfigError(f"{path}: cannot read the {what} ({e.strerror or e})") from None


def _read_cert(path: Path, what: str) -> x509.Certificate:
    try:
        return x509.load_pem_x509_certificate(_read(path, what))
    except ValueError:
        raise ConfigError(f"{path}: not a PEM certificate") from None


def _read_key(path: Path, what: str) -> ec.EllipticCurvePrivateKey:
    data = _read(path, what)
    try:
        mode = path.stat().st_mode
    except OSError:
        mode = 0
    if mode & 0o077:
        raise ConfigError(f"{path}: private key readable by others (mode {mode & 0o777:o}): chmod 600 it")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise ConfigError(f"{path}: not an unencrypted PEM private key") from None
    return key  # type: ignore[return-value]


def cert_pid(cert: dict) -> str | None:
    """The pid a verified peer certificate (``SSLObject.getpeercert()``) names in its URI SAN, if one."""
    uris = [value for kind, value in cert.get("subjectAltName", ()) if kind == "URI" and value.startswith(URI_PREFIX)]
    if len(uris) != 1:
        return None
    try:
        return parse_pid(uris[0][len(URI_PREFIX):])
    except ConfigError:
        return None


def x509_pid(cert: x509.Certificate) -> str | None:
    """`cert_pid` for a `cryptography` certificate."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return None
    uris = [("URI", u) for u in san.get_values_for_type(x509.UniformResourceIdentifier)]
    return cert_pid({"subjectAltName": uris})


@dataclass(frozen=True)
class GroupKeys:
    """One peer's TLS contexts: both verify the other side's chain to the group CA (TLS 1.3 only); the
    pid check is the caller's (`cert_pid`), since a pid is not a host name."""

    pid: str
    server: ssl.SSLContext  # for accepted connections: requires a client certificate
    client: ssl.SSLContext  # for dialled connections


def load_group_keys(folder: Path, pid: str, now: datetime.datetime | None = None) -> GroupKeys:
    """``pid``'s credentials from ``folder``, checked (see the module docstring); ConfigError if unusable."""
    if not folder.is_dir():
        raise ConfigError(f"{folder}: keys folder not found (create it with: tom keys NEIGHBORS {folder})")
    ca_path = folder / CA_CERT
    cert_path, key_path = folder / f"{file_stem(pid)}.pem", folder / f"{file_stem(pid)}.key"
    ca = _read_cert(ca_path, "group CA certificate")
    cert = _read_cert(cert_path, f"certificate of {pid}")
    key = _read_key(key_path, f"private key of {pid}")
    named = x509_pid(cert)
    if named != pid:
        raise ConfigError(f"{cert_path}: the certificate is for {named or 'no TOM peer'}, not for {pid}")
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        raise ConfigError(f"{cert_path}: not issued by the group CA {ca_path}") from None
    now = now or datetime.datetime.now(datetime.timezone.utc)
    for path, c in ((ca_path, ca), (cert_path, cert)):
        if not c.not_valid_before_utc <= now <= c.not_valid_after_utc:
            raise ConfigError(f"{path}: certificate valid only from {c.not_valid_before_utc:%Y-%m-%d %H:%M} "
                              f"to {c.not_valid_after_utc:%Y-%m-%d %H:%M} UTC")
    if cert.public_key() != key.public_key():
        raise ConfigError(f"{key_path} is not the key of {cert_path}")
    return GroupKeys(pid, _context(ssl.PROTOCOL_TLS_SERVER, ca_path, cert_path, key_path),
                     _context(ssl.PROTOCOL_TLS_CLIENT, ca_path, cert_path, key_path))


def _context(protocol: int, ca: Path, cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(protocol)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    ctx.check_hostname = False  # a pid is checked against the URI SAN instead (cert_pid)
    ctx.verify_mode = ssl.CERT_REQUIRED
    try:
        ctx.load_verify_locations(cafile=str(ca))
        ctx.load_cert_chain(str(cert), str(key))
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"{cert}: TLS cannot use it ({e})") from None
    if protocol == ssl.PROTOCOL_TLS_SERVER:
        ctx.num_tickets = 0  # links never resume TLS sessions: save the tickets' work
    return ctx
