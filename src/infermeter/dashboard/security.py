"""The dashboard's guards: which hosts may be named, who holds the token, which ids exist.

Safe by default (the record of exposed ML dashboards is long): it binds 127.0.0.1; binding any
other address requires a token, checked on every HTTP request and on the WebSocket (header
`Authorization: Bearer T`, the `infermeter_token` cookie the page sets, or `?token=T` once).
The Host header must be one of the bound names (DNS rebinding: a page on evil.example that
resolves to 127.0.0.1 still sends Host: evil.example). A WebSocket's Origin must be one of them
too (a page elsewhere cannot open it with the user's cookie). Run and sweep ids must be hex.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
from dataclasses import dataclass, field

COOKIE = "infermeter_token"
_ID = re.compile(r"^[0-9a-f]{1,32}$")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


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


def _host_name(value: str) -> str:
    """'127.0.0.1:8765' -> '127.0.0.1'; '[::1]:8765' -> '[::1]'."""
    value = (value or "").strip().lower()
    if value.startswith("["):
        return value[: value.index("]") + 1] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


@dataclass
class Guard:
    """The dashboard's access rules, fixed at start-up."""

    host: str = "127.0.0.1"
    token: str | None = None
    extra_hosts: list[str] = field(default_factory=list)

    @property
    def allowed_hosts(self) -> set[str]:
        """Names the Host header may carry."""
        names = {*LOOPBACK_NAMES, self.host.lower(), *(h.lower() for h in self.extra_hosts)}
        if self.host in ("0.0.0.0", "::"):
            names.discard(self.host)
        return names

    def host_ok(self, header: str | None) -> bool:
        """Whether a Host header names this server."""
        return _host_name(header or "") in self.allowed_hosts

    def origin_ok(self, origin: str | None) -> bool:
        """Whether a WebSocket's Origin is this server's own page."""
        if not origin:
            return False
        m = re.match(r"^https?://([^/]+)$", origin.strip().lower())
        return m is not None and self.host_ok(m.group(1))

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
