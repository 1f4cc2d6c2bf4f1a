"""Where a webhook may point: the worker POSTs to a URL a user typed, so the URL must not reach
into the portal's own networks (server-side request forgery).

- `webhook_url_refusal(url)`: why the URL is refused (a sentence for a 400), or None. http or
  https only, no user name or password in it, a host, and every address the host resolves to
  public: not loopback, link-local (169.254/16 with the clouds' metadata address, fe80::/10),
  private, shared, reserved or multicast, nor in the cluster's own ranges
  (PORTAL_WORKLOAD_EGRESS_INTERNET_EXCEPT, else tenants.manifests.PRIVATE_RANGES).
  An IPv6 address that carries an IPv4 one (IPv4-mapped and -translated, IPv4-compatible
  `::a.b.c.d`, NAT64 64:ff9b::/96 and 64:ff9b:1::/48, 6to4 2002::/16, Teredo 2001::/32) is
  judged by that IPv4 address too, since a host or a gateway on the way may deliver it there;
  and the IPv6 ranges that are not global are refused by name (NON_GLOBAL_V6: Python's
  `is_global` misses several, site-local fec0::/10 among them).
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


# IPv6 ranges that are not on the public internet (IANA's special-purpose registry, and the
# deprecated ones), beyond what `ipaddress` marks loopback, link-local, private or multicast:
# Python 3.11 calls the first five global.
NON_GLOBAL_V6 = tuple(ipaddress.IPv6Network(cidr) for cidr in (
    "::/96",  # IPv4-compatible (deprecated): never a destination of its own
    "::ffff:0:0:0/96",  # IPv4-translated (SIIT): the translator's side of the network
    "64:ff9b:1::/48",  # local-use IPv4/IPv6 translation: the site's own NAT64
    "fec0::/10",  # site-local (deprecated, still routed inside some sites)
    "3fff::/20",  # documentation
    "2001::/23",  # IETF protocol assignments, Teredo among them
    "2001:db8::/32",  # documentation
    "100::/64",  # discard-only
    "5f00::/16",  # segment routing (SRv6) SIDs
    "fc00::/7",  # unique local
))


def embedded_ipv4(address: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries, where a host or a translator on the way may
    deliver to them: IPv4-mapped, IPv4-translated and IPv4-compatible (the low 32 bits), NAT64
    (64:ff9b::/96, and 64:ff9b:1::/48 read as /96), 6to4 (bits 16–47), Teredo (its server and
    its client)."""
    found: list[ipaddress.IPv4Address] = []
    low = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    elif (address in ipaddress.IPv6Network("::ffff:0:0:0/96")
          or address in ipaddress.IPv6Network("64:ff9b::/96")
          or address in ipaddress.IPv6Network("64:ff9b:1::/48")):
        found.append(low)
    elif address in ipaddress.IPv6Network("::/96") and int(address) > 1:
        found.append(low)  # "::" and "::1" are not IPv4-compatible forms
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return found


def _address_refusal(address: Address) -> str | None:
    if settings.PORTAL_WEBHOOK_ALLOW_PRIVATE:
        return None
    if isinstance(address, ipaddress.IPv6Address):
        for inner in embedded_ipv4(address):
            refusal = _address_refusal(inner)
            if refusal is not None:
                return f"{refusal} (carried in an IPv6 address)"
        if address.ipv4_mapped is not None:
            return None  # the IPv4 address is the destination: judged above
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (such as the cloud's metadata service)"
    if any(address in network for network in _blocked_networks()):
        return "a private address or one of the cluster's own ranges"
    if isinstance(address, ipaddress.IPv6Address) and (
            address.is_site_local or any(address in net for net in NON_GLOBAL_V6)):
        return "an address that is not on the public internet"
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
