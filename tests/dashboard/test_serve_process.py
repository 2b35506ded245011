"""`infermeter serve` as a user runs it: a real server process, real HTTP and WebSocket clients
(issue 35, item 12)."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request

import pytest


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path, *args: str) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "infermeter",
            "serve",
            "--port",
            str(port),
            "--db",
            str(tmp_path / "r.db"),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return proc, port
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise AssertionError(proc.communicate()[1])


def test_the_url_printed_for_every_interface_answers(tmp_path):
    """`serve --host 0.0.0.0` printed http://0.0.0.0:PORT/, which answered 400 unknown host."""
    proc, port = _serve(tmp_path, "--host", "0.0.0.0")
    try:
        banner = proc.stderr.readline()
        url = re.search(r"(http://\S+)", banner).group(1)
        assert "0.0.0.0" not in url, banner
        name = url.split("//", 1)[1].split(":", 1)[0]
        # the printed name, sent as the Host header to this machine (it may not resolve here)
        req = urllib.request.Request(
            url.replace(f"//{name}:", "//127.0.0.1:"), headers={"Host": f"{name}:{port}"}
        )
        with urllib.request.urlopen(req, timeout=10) as resp:
            assert resp.status == 200
    finally:
        proc.kill()
        proc.communicate()


def test_ctrl_c_with_pages_open_stops_without_a_traceback(tmp_path):
    """A page still open (and another gone without a close) at Ctrl-C: uvicorn cancelled the
    live handler after its grace period and printed the CancelledError's traceback."""
    ws_client = pytest.importorskip("websockets.sync.client")
    proc, port = _serve(tmp_path)
    origin = f"http://127.0.0.1:{port}"
    with ws_client.connect(f"ws://127.0.0.1:{port}/ws/live", origin=origin) as gone:
        gone.recv()
        gone.socket.close()  # the page vanished without a close frame
    with ws_client.connect(f"ws://127.0.0.1:{port}/ws/live", origin=origin) as page:
        page.recv()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode in (0, 130), err
    assert "Traceback" not in err and "CancelledError" not in err, err
