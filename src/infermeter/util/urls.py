"""URLs shown or stored without their secrets: one function for every URL a user gives.

Why: `load endpoint http://user:secret@host` printed the password in the summary, stored it in
the run's model spec and device name (served to every dashboard token holder) and wrote it four
times into load.json; `--metrics-url` with user-info printed it too. Database URLs were masked
(SQLAlchemy's `render_as_string`) and nothing else was. Every URL that reaches output, a stored
document or the dashboard goes through `masked_url`; the clients keep the real one.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

#: query parameters whose values are credentials (`?api_key=`, `?token=`, a signed URL's `sig`)
SECRET_PARAM = re.compile(
    r"(key|token|secret|passw(or)?d|pwd|auth|signature|^sig$|credential|session)", re.I
)
MASK = "***"


def masked_url(url: str) -> str:
    """`url` with the password of its user-info and secret-looking query values as ***.

    A user-info without a password (a token as the user name, `https://TOKEN@host`) is masked
    whole. Anything that does not parse as a URL with a host comes back as it was given.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return MASK if "@" in url else url
    if not parts.netloc:
        return url
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user, sep, _ = userinfo.partition(":")
        netloc = f"{user}:{MASK}@{host}" if sep else f"{MASK}@{host}"
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(SECRET_PARAM.search(k) for k, _ in pairs):
            masked = [(k, MASK if SECRET_PARAM.search(k) else v) for k, v in pairs]
            query = urlencode(masked, safe="*")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


_URL = re.compile(r"https?://[^\s'\"<>]+")


def masked_text(text: str) -> str:
    """`text` (an error message, a log line) with every http(s) URL in it masked."""
    return _URL.sub(lambda m: masked_url(m.group(0)), text)


def without_credentials(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the URL without user-info, (user, password) for HTTP basic auth or None).

    Python's urllib resolves `user:pass@host` as the host name ("Name or service not known"),
    so a client given such a URL sends the credentials as basic auth instead.
    """
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, host = parts.netloc.rsplit("@", 1)
    user, _, password = userinfo.partition(":")
    bare = urlunsplit((parts.scheme, host, parts.path, parts.query, parts.fragment))
    return bare, (unquote(user), unquote(password))
