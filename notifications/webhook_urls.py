"""Where a webhook may point: the worker POSTs to a URL a user typed, so the URL must not reach
into the portal's own networks (server-side request forgery).

- `webhook_url_refusal(url)`: why the URL is refused (a sentence for a 400), or None. http or
  https only, no user name or password in it, a host, and every address the host resolves to
  public: not loopback, link-local (169.254/16 with the clouds' metadata address, fe80::/10),
  private, shared, reserved or multicast, nor in the cluster's own ranges
  (PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT, else tenants.manifests.PRIVATE_RANGES).
  PORTAL_WEBHOOK_ALLOW_PRIVATE (off by default) lets a site post to its own network.
- `webhook_target(url)`: the same check at send time (DNS can change between the creation and
  the POST), returning the one address to connect to, so that the POST goes where the check
  looked (no second lookup a rebinding DNS server could answer differently).
- `url_host(url)`: the host alone, what logs and the audit trail may show of a URL (a Slack
  incoming-webhook URL is a secret: its path is the credential).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import socket
from urllib.parse import urlsplit

from django.conf import settings

from tenants.manifests import PRIVATE_RANGES

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookURLRefused(ValueError):
    """The URL may not be a webhook's (the message says why, without the URL's secret parts)."""


@dataclasses.dataclass(frozen=True)
class WebhookTarget:
    scheme: str
    host: str  # as written (the Host header, the TLS server name)
    address: str  # the checked address the POST connects to
    port: int
    target: str  # path and query

    @property
    def connect_url(self) -> str:
        """The URL with the checked address in place of the host name."""
        literal = f"[{self.address}]" if ":" in self.address else self.address
        return f"{self.scheme}://{literal}:{self.port}{self.target}"

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == default else f"{host}:{self.port}"


def url_host(url: str) -> str:
    """The URL's host alone ("" when it has none): safe to log and to audit."""
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def _blocked_networks() -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    ranges = settings.PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT or PRIVATE_RANGES
    return [ipaddress.ip_network(cidr, strict=False) for cidr in (*PRIVATE_RANGES, *ranges)]


def _address_refusal(address: Address) -> str | None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if settings.PORTAL_WEBHOOK_ALLOW_PRIVATE:
        return None
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (such as the cloud's metadata service)"
    if any(address in network for network in _blocked_networks()):
        return "a private address or one of the cluster's own ranges"
    if not address.is_global or address.is_multicast:
        return "an address that is not on the public internet"
    return None


def _parse(url: str) -> tuple[str, str, int, str]:
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError as exc:
        raise WebhookURLRefused("The URL is not valid.") from exc
    if parts.scheme not in ("http", "https"):
        raise WebhookURLRefused("A webhook's URL must start with http:// or https://.")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise WebhookURLRefused("A webhook's URL may not hold a user name or password "
                                "(user:password@host).")
    if not parts.hostname:
        raise WebhookURLRefused("A webhook's URL must name a host.")
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80), target


def _resolve(host: str, port: int) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise WebhookURLRefused(f"The host {host!r} does not resolve.") from exc
    # an IPv6 answer may carry a zone ("fe80::1%eth0"): the address is before it
    return [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]


def webhook_target(url: str) -> WebhookTarget:
    """The checked address to POST `url` to; WebhookURLRefused when the URL may not be used."""
    scheme, host, port, target = _parse(url)
    addresses = _resolve(host, port)
    for address in addresses:
        refusal = _address_refusal(address)
        if refusal is not None:
            raise WebhookURLRefused(f"The host {host!r} is {refusal}; webhooks may only post to "
                                    f"the public internet.")
    return WebhookTarget(scheme=scheme, host=host, address=str(addresses[0]), port=port,
                         target=target)


def webhook_url_refusal(url: str) -> str | None:
    """Why `url` may not be a webhook's, or None."""
    try:
        webhook_target(url)
    except WebhookURLRefused as exc:
        return str(exc)
    return None
