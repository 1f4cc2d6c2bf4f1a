"""gpuctl's TLS: the portal's requests and a workload's wss:// address check the configured CA
(or httpx's bundle), none with `insecure`; the context is made once per process."""

from __future__ import annotations

import ssl

from gpuctl.client import PortalClient
from gpuctl.config import Config, Credentials
from stack.k8s.pki import CertificateAuthority


def portal_client(**tls) -> PortalClient:
    credentials = Credentials(auth_url="https://keystone.example.org/v3", username="researcher",
                              password="x", **tls)
    return PortalClient(Config(credentials=credentials, portal_url="https://portal.example.org",
                               source="environment"))


def test_the_configured_ca_is_what_is_checked(tmp_path):
    ca = CertificateAuthority(tmp_path, name="a site's own CA")
    client = portal_client(cacert=str(ca.cert_file))
    context = client.ssl_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    issuers = [dict(item[0] for item in cert["subject"]) for cert in context.get_ca_certs()]
    assert issuers == [{"commonName": "a site's own CA"}]
    client.close()


def test_without_a_ca_the_bundle_is_checked_and_insecure_checks_nothing():
    checked = portal_client().ssl_context()
    assert checked.verify_mode == ssl.CERT_REQUIRED and checked.check_hostname
    assert len(checked.get_ca_certs()) > 10  # certifi's bundle
    unchecked = portal_client(insecure=True).ssl_context()
    assert unchecked.verify_mode == ssl.CERT_NONE and not unchecked.check_hostname


def test_one_context_per_process_for_the_same_settings(tmp_path):
    ca = CertificateAuthority(tmp_path)
    first, second = portal_client(cacert=str(ca.cert_file)), portal_client(cacert=str(ca.cert_file))
    assert first.ssl_context() is second.ssl_context()
    assert portal_client().ssl_context() is not first.ssl_context()
    assert first._http._transport._pool._ssl_context is first.ssl_context()
    first.close()
    second.close()
