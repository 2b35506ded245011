"""The dashboard's guards: which hosts may be named, who holds the token, which ids exist.

Safe by default (the record of exposed ML dashboards is long): it binds 127.0.0.1; binding any
other address requires a token, checked on every HTTP request and on the WebSocket (header
`Authorization: Bearer T`, the `infermeter_token` cookie the page sets, or `?token=T` once).
The Host header must be one of the bound names (DNS rebinding: a page on evil.example that
resolves to 127.0.0.1 still sends Host: evil.example), on the bound port. A WebSocket's Origin
must be this very server: scheme http, an allowed name and the bound port (a page on another
port of localhost, or on https, is another origin and must not read the live feed). Both are
parsed as URLs by the standard library (`urllib.parse.urlsplit`: IPv6 literals, ports), never
cut by hand, and any user-info (`localhost:1@evil.example`) is refused. Run and sweep ids must
be hex.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass, field
from urllib.parse import urlsplit

COOKIE = "infermeter_token"
_ID = re.compile(r"^[0-9a-f]{1,32}$")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    """True for 127.0.0.0/8, ::1 and localhost."""
    if host in ("localhost",):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def valid_id(value: str) -> bool:
    """Run and sweep ids (or prefixes) are lowercase hex, at most 32 characters."""
    return bool(_ID.match(value or ""))


def parse_authority(value: str, scheme: str = "") -> tuple[str, int | None] | None:
    """(host name, port) of a Host header or of an origin (its scheme given), else None.

    A Host header: "127.0.0.1:8765", "[::1]:8765"; an origin: "http://localhost:8765". Not
    one: user-info (`a:b@host`), a path, query or fragment, a port that is not a number in
    1-65535 (`localhost:8765.evil.example`), or no host. IPv6 names come without brackets.
    """
    text = (value or "").strip()
    if not text or any(c.isspace() for c in text):
        return None
    try:
        parts = urlsplit(text if scheme else "//" + text)
        port = parts.port  # ValueError for a port that is not a number in range
    except ValueError:
        return None
    if parts.scheme != scheme or parts.username is not None or parts.password is not None:
        return None
    if parts.path or parts.query or parts.fragment or "@" in parts.netloc:
        return None
    if not parts.hostname:
        return None
    return parts.hostname.lower(), port


@dataclass
class Guard:
    """The dashboard's access rules, fixed at start-up.

    `port` is the port the server listens on (`infermeter serve` always sets it); None accepts
    any port, for an app embedded behind a proxy that rewrites Host.
    """

    host: str = "127.0.0.1"
    token: str | None = None
    extra_hosts: list[str] = field(default_factory=list)
    port: int | None = None

    @property
    def allowed_hosts(self) -> set[str]:
        """Names the Host header may carry (IPv6 without brackets)."""
        names = {*LOOPBACK_NAMES, *(h.lower().strip("[]") for h in (self.host, *self.extra_hosts))}
        if self.host in ("0.0.0.0", "::"):
            names.discard(self.host)
        return names

    def _names_us(self, parsed: tuple[str, int | None] | None, default_port: int | None) -> bool:
        if parsed is None:
            return False
        name, port = parsed
        if name not in self.allowed_hosts:
            return False
        return self.port is None or (port if port is not None else default_port) == self.port

    def host_ok(self, header: str | None) -> bool:
        """Whether a Host header names this server (name and port)."""
        return self._names_us(parse_authority(header or ""), default_port=80)

    def origin_ok(self, origin: str | None) -> bool:
        """Whether a WebSocket's Origin is this server's own page: http, name and port."""
        return self._names_us(parse_authority(origin or "", scheme="http"), default_port=80)

    def token_ok(self, bearer: str | None, cookie: str | None, query: str | None) -> bool:
        """Whether any of the three carries the token (always true without one)."""
        if self.token is None:
            return True
        for given in (bearer, cookie, query):
            if given and secrets.compare_digest(given.encode(), self.token.encode()):
                return True
        return False


def new_token() -> str:
    """A random token for a dashboard bound beyond loopback."""
    return secrets.token_urlsafe(24)
