"""Where webhooks may go: the engine's allowlist of hosts, checked on the addresses
a name resolves to (pure: no I/O).

``REMINDKIT_WEBHOOK_HOSTS`` is read from the engine's own environment, never from
the shared store. Its entries, comma-separated:

* a host name (``hooks.example.com``) or a wildcard (``*.example.com``): URLs with
  that host may be posted to, at its public addresses; ``*`` is any name;
* an address or a network (``127.0.0.1``, ``10.0.0.0/8``, ``::1``): that address may
  be reached, whatever name the URL gives.

Unset, it is ``*``: any name, public addresses only. An address that is not public
(loopback, private, link-local such as the metadata service at 169.254.169.254,
shared, multicast, reserved, unspecified; an IPv6 address that embeds one: mapped,
NAT64, 6to4, Teredo, IPv4-compatible) is refused unless a network entry covers it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..errors import InvalidInput

HOSTS_ENV = "REMINDKIT_WEBHOOK_HOSTS"
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network
_NAT64 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("64:ff9b:1::/48"))
_COMPAT = ipaddress.ip_network("::/96")


def embedded_v4(addr: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for (mapped, NAT64, 6to4, Teredo), else None."""
    if isinstance(addr, ipaddress.IPv4Address):
        return None
    if addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    if any(addr in net for net in _NAT64):
        return ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    if addr.sixtofour is not None:
        return addr.sixtofour
    if addr.teredo is not None:
        return addr.teredo[1]
    return None


def why_not_public(addr: Address) -> str | None:
    """What kind of address this is, when it is not a public unicast one; else None."""
    inner = embedded_v4(addr)
    if inner is not None:
        why = why_not_public(inner)
        return None if why is None else f"{why} (inside {addr})"
    if isinstance(addr, ipaddress.IPv6Address) and addr in _COMPAT:
        return "an IPv4-compatible IPv6 address"
    for what, flag in (
        ("unspecified", addr.is_unspecified),
        ("loopback", addr.is_loopback),
        ("link-local", addr.is_link_local),
        ("multicast", addr.is_multicast),
        ("private", addr.is_private),
        ("reserved", addr.is_reserved),
    ):
        if flag:
            return f"a {what} address"
    if isinstance(addr, ipaddress.IPv6Address) and addr.is_site_local:
        return "a site-local address"
    if not addr.is_global:
        return "not a public address"
    return None


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.strip("[]").split("%", 1)[0])
    except ValueError:
        return None


@dataclass(frozen=True)
class HostAllowlist:
    """Names (None: any) and networks a webhook may reach (see the module's docstring)."""

    names: tuple[str, ...] | None = None
    networks: tuple[Network, ...] = ()

    @classmethod
    def parse(cls, value: str | None) -> HostAllowlist:
        if value is None:
            return cls()
        names: list[str] = []
        networks: list[Network] = []
        for raw in value.split(","):
            entry = raw.strip().lower().rstrip(".")
            if not entry:
                continue
            if "/" in entry or _address(entry) is not None:
                try:
                    networks.append(ipaddress.ip_network(entry.strip("[]"), strict=False))
                except ValueError:
                    raise InvalidInput(
                        f"{HOSTS_ENV}: {raw.strip()!r} is not an address or a network",
                        code="invalid_setting",
                    ) from None
                continue
            label = entry[2:] if entry.startswith("*.") else entry
            if entry != "*" and (
                not label or any(not (c.isascii() and (c.isalnum() or c in "-._")) for c in label)
            ):
                raise InvalidInput(
                    f"{HOSTS_ENV}: {raw.strip()!r} is not a host name, *.name, *, an address or a network",
                    code="invalid_setting",
                )
            names.append(entry)
        return cls(None if "*" in names else tuple(names), tuple(networks))

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> HostAllowlist:
        return cls.parse(env.get(HOSTS_ENV))

    def name_allowed(self, host: str) -> bool:
        if self.names is None:
            return True
        host = host.lower().rstrip(".")
        return any(host == n or (n.startswith("*.") and host.endswith(n[1:])) for n in self.names)

    def why_not(self, host: str, addr: Address) -> str | None:
        """Why ``addr`` (one of ``host``'s addresses) may not be reached, or None."""
        if any(addr in net for net in self.networks):
            return None
        inner = embedded_v4(addr)
        if inner is not None and any(inner in net for net in self.networks):
            return None
        if not self.name_allowed(host):
            return f"{host} is not in {HOSTS_ENV}"
        kind = why_not_public(addr)
        if kind is None:
            return None
        shown = host if _address(host) is not None else f"{host} resolves to {addr}"
        return f"{shown}: {kind}, which {HOSTS_ENV} does not allow"

    def why_not_url(self, url: str) -> str | None:
        """What can be told of ``url`` before any name is resolved: its scheme, and a
        host that is a literal address or a name outside the list; else None."""
        try:
            parts = urlsplit(url)
            host = parts.hostname
        except ValueError:
            return f"{url[:100]!r} is not a URL"
        if parts.scheme not in ("http", "https") or not host:
            return f"{url[:100]!r} is not an http(s) URL"
        addr = _address(host)
        if addr is not None:
            return self.why_not(host, addr)
        if not self.name_allowed(host) and not self.networks:
            return f"{host} is not in {HOSTS_ENV}"
        return None


__all__ = ["HOSTS_ENV", "HostAllowlist", "embedded_v4", "why_not_public"]
