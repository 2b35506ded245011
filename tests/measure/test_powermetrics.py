"""powermetrics: a recorded plist sample, the NUL-separated stream, a fake process, no root."""

import sys
import time
from pathlib import Path

import pytest

from infermeter.measure.energy.powermetrics import (
    PowermetricsSource,
    parse_sample,
    probe_powermetrics_source,
    split_stream,
)

SAMPLE = (Path(__file__).parent / "data" / "powermetrics_sample.plist").read_bytes()


def test_parse_recorded_sample_reads_energy_in_millijoules():
    got = parse_sample(SAMPLE)
    assert got == pytest.approx({"cpu": 0.612, "gpu": 1.035, "ane": 0.0})


def test_parse_falls_back_to_power_times_elapsed():
    text = SAMPLE.decode()
    for domain in ("cpu", "gpu", "ane"):
        while f"<key>{domain}_energy</key>" in text:
            start = text.index(f"<key>{domain}_energy</key>")
            end = text.index("\n", start)
            text = text[:start] + text[end:]
    got = parse_sample(text.encode())
    elapsed = 100234875 / 1e9
    assert got["cpu"] == pytest.approx(6.1057 * elapsed)
    assert got["gpu"] == pytest.approx(10.3258 * elapsed)


@pytest.mark.parametrize("blob", [b"not xml", b"<plist version='1.0'><dict></dict></plist>"])
def test_parse_rejects_other_documents(blob):
    with pytest.raises(ValueError):
        parse_sample(blob)


def test_split_stream_yields_each_nul_separated_document(tmp_path):
    path = tmp_path / "stream"
    path.write_bytes(SAMPLE + b"\0" + SAMPLE + b"\0\n" + SAMPLE)
    with path.open("rb") as f:
        docs = list(split_stream(f, chunk=97))  # chunks that cut documents anywhere
    assert len(docs) == 3
    assert all(parse_sample(d)["cpu"] == pytest.approx(0.612) for d in docs)


def test_source_accumulates_reports_from_a_running_process(tmp_path):
    feed = tmp_path / "feed.plist"
    feed.write_bytes(SAMPLE)
    script = (
        "import sys, time\n"
        f"doc = open({str(feed)!r}, 'rb').read()\n"
        "for _ in range(3):\n"
        "    sys.stdout.buffer.write(doc + b'\\0'); sys.stdout.flush(); time.sleep(0.05)\n"
        "time.sleep(30)\n"
    )
    src = PowermetricsSource(100, argv=[sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 5
        while src.reports < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert src.reports == 3
        assert src.read_j() == pytest.approx({"cpu": 3 * 0.612, "gpu": 3 * 1.035, "ane": 0.0})
        assert src.domains() == ["cpu", "gpu", "ane"]
        assert src.update_period_s == 0.1
    finally:
        src.close()


def test_without_root_the_message_says_so():
    script = (
        "import sys; sys.stderr.write('powermetrics must be invoked as the superuser\\n'); "
        "sys.exit(1)"
    )
    with pytest.raises(PermissionError, match="needs root"):
        PowermetricsSource(100, argv=[sys.executable, "-c", script])


def test_sudo_password_prompt_refused_is_a_permission_error():
    script = "import sys; sys.stderr.write('sudo: a password is required\\n'); sys.exit(1)"
    with pytest.raises(PermissionError):
        PowermetricsSource(100, argv=[sys.executable, "-c", script])


@pytest.mark.skipif(sys.platform == "darwin", reason="checks the non-macOS answer")
def test_probe_off_macos_says_why():
    got = probe_powermetrics_source()
    assert got.name == "powermetrics" and "macOS only" in got.reason
