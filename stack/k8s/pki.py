"""The real control plane's certificates, made with `cryptography`: one CA, serving and client certs.

Everything is on loopback and lives as long as the cluster's folder. Client certificates carry the
user in CN and the groups in O, as the API server reads them (`system:masters` for an admin).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

VALID_FOR = dt.timedelta(days=365)


def _write_key(path: Path, key: PrivateKeyTypes) -> None:
    path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                       serialization.PrivateFormat.PKCS8,
                                       serialization.NoEncryption()))
    path.chmod(0o600)


def _name(common_name: str, organizations: tuple[str, ...] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    return x509.Name([*parts, x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


class CertificateAuthority:
    """A CA kept as ca.crt / ca.key in `folder` (made on first use, reused after)."""

    def __init__(self, folder: Path, name: str = "gpu-portal-cluster-ca") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.cert_file = folder / "ca.crt"
        self.key_file = folder / "ca.key"
        if not self.cert_file.exists():
            key = ec.generate_private_key(ec.SECP256R1())
            now = dt.datetime.now(dt.UTC)
            cert = (x509.CertificateBuilder()
                    .subject_name(_name(name)).issuer_name(_name(name))
                    .public_key(key.public_key()).serial_number(x509.random_serial_number())
                    .not_valid_before(now - dt.timedelta(minutes=5))
                    .not_valid_after(now + 10 * VALID_FOR)
                    .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                    .add_extension(x509.KeyUsage(
                        digital_signature=True, key_cert_sign=True, crl_sign=True,
                        content_commitment=False, key_encipherment=False, data_encipherment=False,
                        key_agreement=False, encipher_only=False, decipher_only=False),
                        critical=True)
                    .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                   critical=False)
                    .sign(key, hashes.SHA256()))
            _write_key(self.key_file, key)
            self.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        self._cert = x509.load_pem_x509_certificate(self.cert_file.read_bytes())
        loaded = serialization.load_pem_private_key(self.key_file.read_bytes(), None)
        if not isinstance(loaded, ec.EllipticCurvePrivateKey):
            raise TypeError(f"{self.key_file} is not the elliptic-curve key this CA makes; "
                            "delete the folder to start over")
        self._key = loaded

    @property
    def pem(self) -> bytes:
        return self.cert_file.read_bytes()

    def _issue(self, stem: str, subject: x509.Name, *, server_hosts: tuple[str, ...] = (),
               client: bool = False) -> tuple[Path, Path]:
        cert_file, key_file = self.folder / f"{stem}.crt", self.folder / f"{stem}.key"
        if cert_file.exists() and key_file.exists():
            return cert_file, key_file
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if server_hosts else []) + \
                 ([ExtendedKeyUsageOID.CLIENT_AUTH] if client else [])
        builder = (x509.CertificateBuilder()
                   .subject_name(subject).issuer_name(self._cert.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - dt.timedelta(minutes=5))
                   .not_valid_after(now + VALID_FOR)
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.KeyUsage(
                       digital_signature=True, key_encipherment=False, key_cert_sign=False,
                       crl_sign=False, content_commitment=False, data_encipherment=False,
                       key_agreement=False, encipher_only=False, decipher_only=False),
                       critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       self._key.public_key()), critical=False))
        if server_hosts:
            names: list[x509.GeneralName] = []
            for host in server_hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        _write_key(key_file, key)
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert_file, key_file

    def server_cert(self, stem: str, hosts: tuple[str, ...] = ("127.0.0.1", "localhost"),
                    common_name: str | None = None) -> tuple[Path, Path]:
        """A serving certificate for `hosts` (IP addresses or DNS names): (cert, key) paths."""
        return self._issue(stem, _name(common_name or stem), server_hosts=hosts)

    def client_cert(self, stem: str, user: str, groups: tuple[str, ...] = ()) -> tuple[Path, Path]:
        """A client certificate for `user` in `groups`: (cert, key) paths."""
        return self._issue(stem, _name(user, groups), client=True)


def service_account_keys(folder: Path) -> tuple[Path, Path]:
    """The key pair that signs and checks ServiceAccount tokens: (private key, public key)."""
    private, public = folder / "sa.key", folder / "sa.pub"
    if not private.exists():
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        _write_key(private, key)
        public.write_bytes(key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    return private, public
