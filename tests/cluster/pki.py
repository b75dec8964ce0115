"""A throwaway certificate authority for the real-API-server tier.

The API server needs a serving certificate its clients trust and a CA that
signs client certificates; a webhook it calls needs a serving certificate
whose CA goes into the webhook configuration's ``caBundle``. Everything here is
generated per test session and lives only in temporary files.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALIDITY = datetime.timedelta(days=2)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    """PKCS#8 PEM without a passphrase, as kube-apiserver and ssl read it."""
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its key, in PEM and as files on disk."""

    cert_pem: bytes
    key_pem: bytes
    cert_file: Path
    key_file: Path


class CertificateAuthority:
    """A self-signed CA that issues serving and client certificates into ``directory``."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        directory.mkdir(parents=True, exist_ok=True)
        self._key = _key()
        now = datetime.datetime.now(datetime.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                    key_encipherment=False, data_encipherment=False, key_agreement=False,
                    encipher_only=False, decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert_pem = self._cert.public_bytes(serialization.Encoding.PEM)
        self.cert_file = directory / f"{name}-ca.crt"
        self.cert_file.write_bytes(self.cert_pem)

    def issue(
        self,
        file_stem: str,
        common_name: str,
        *,
        hosts: tuple[str, ...] = (),
        organizations: tuple[str, ...] = (),
        client: bool = False,
    ) -> KeyPair:
        """Sign a certificate for ``hosts`` (IP addresses or DNS names) or, with ``client``, a client identity.

        For a client certificate kube-apiserver takes the common name as the
        user name and each organization as a group (``system:masters`` is the
        superuser group).
        """
        if not client and not hosts:
            raise ValueError("a serving certificate needs at least one host (IP address or DNS name)")
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org) for org in organizations]
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False,
            )
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False
            )
        )
        if hosts:
            names: list[x509.GeneralName] = []
            for host in hosts:
                try:
                    names.append(x509.IPAddress(ipaddress.ip_address(host)))
                except ValueError:
                    names.append(x509.DNSName(host))
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert_pem = builder.sign(self._key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)
        pair = KeyPair(
            cert_pem=cert_pem,
            key_pem=key_pem(key),
            cert_file=self.directory / f"{file_stem}.crt",
            key_file=self.directory / f"{file_stem}.key",
        )
        pair.cert_file.write_bytes(pair.cert_pem)
        pair.key_file.write_bytes(pair.key_pem)
        pair.key_file.chmod(0o600)
        return pair


def write_signing_key(private: Path, public: Path) -> None:
    """Write a fresh EC key pair for service-account tokens: the private key signs, the public one verifies."""
    key = _key()
    private.write_bytes(key_pem(key))
    private.chmod(0o600)
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
