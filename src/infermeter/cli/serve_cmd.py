"""`infermeter serve`: the dashboard on http://127.0.0.1:8765 (safe by default)."""

from __future__ import annotations

import typer
from rich.console import Console

from infermeter.cli.guard import guard
from infermeter.cli.options import DB
from infermeter.errors import UserError


@guard
def serve_command(
    host: str = typer.Option(
        "127.0.0.1", help="Address to bind; anything but loopback needs a token."
    ),
    port: int = typer.Option(8765, help="Port."),
    token: str = typer.Option(
        None, help="Access token (generated and printed when binding beyond loopback)."
    ),
    allow_host: list[str] = typer.Option(
        None, help="Extra Host header names to accept (a DNS name the server is reached by)."
    ),
    db: str = DB,
    poll_ms: int = typer.Option(250, help="How often the live page checks the store (ms)."),
) -> None:
    """Serve runs, sweeps and a live page of running profiles in the browser."""
    import socket

    from infermeter.extras import require

    require("dashboard", "`infermeter serve` (the dashboard)")
    import uvicorn

    from infermeter.dashboard import create_app
    from infermeter.dashboard.security import Guard, is_loopback, new_token
    from infermeter.store import Store

    if not 1 <= port <= 65535:
        raise UserError(f"--port {port} is not a port", "use 1024-65535, e.g. 8765")
    if not 50 <= poll_ms <= 60_000:
        raise UserError(f"--poll-ms {poll_ms} is outside 50..60,000", "use e.g. 250 (ms)")
    if not is_loopback(host) and token is None:
        token = new_token()
    store = Store(db)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        try:
            probe.bind((host, port))
        except OSError as exc:
            raise UserError(
                f"cannot listen on {host}:{port} ({exc.strerror})",
                "pick another --port, or stop what is using it",
            ) from None
    extra = list(allow_host or [])
    shown = "localhost" if is_loopback(host) else host
    if host in ("0.0.0.0", "::"):
        # every interface: the URL names this machine, which the guard must then accept (the
        # printed http://0.0.0.0:PORT/ was answered "400 unknown host")
        shown = socket.gethostname().lower()
        extra.append(shown)
    guard_ = Guard(host=host, token=token, extra_hosts=extra, port=port)
    app = create_app(store, guard_, poll_s=poll_ms / 1000)
    url = f"http://{shown}:{port}/" + (f"?token={token}" if token else "")
    console = Console(stderr=True, soft_wrap=True)
    console.print(
        f"infermeter dashboard on {url} (database {store.where}); Ctrl-C stops it", markup=False
    )
    if token and not is_loopback(host):
        console.print(
            "anyone with this URL can read your runs: share it like a password",
            style="yellow",
            markup=False,
        )
    if host in ("0.0.0.0", "::"):
        console.print(
            f"clients must name this machine {shown!r} or localhost; add the names or addresses "
            "they use with --allow-host",
            style="dim",
            markup=False,
        )
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=2)
