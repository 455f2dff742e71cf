"""The watcher's Prometheus metrics: the exposition text (checked by promtool), hostile label
values, the series cap, the textfile writer, the HTTP server, and a real Prometheus scraping it."""

from __future__ import annotations

import math
import os
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from tests.conftest_prometheus import MetricsTarget, Prometheus, free_port, require_binary

from ckptwatch.errors import LakeError, UsageError
from ckptwatch.live.metrics import (
    CONTENT_TYPE,
    DURATION_BUCKETS_S,
    METRICS,
    MetricsServer,
    WatchMetrics,
    escape_label_value,
    write_textfile,
)

#: Job ids a file may carry: quotes, backslashes, newlines, controls, non-ASCII, a forged line.
HOSTILE_JOB_IDS = [
    'quo"te',
    "back\\slash\\",
    'ends with \\"',
    "new\nline",
    "cr\rlf\r\n",
    "esc\x1b[2J\x07bel",
    "nul\x00del\x7fc1\x9b",
    "tab\there",
    "ünïcødé ✓ 作业",
    "lone \ud800 surrogate",
    'x"} 1\nckptwatch_checkpoint_inflight_seconds{job_id="forged",tier="pool"} 999\n#',
]


def promtool_check(text: str) -> None:
    """``promtool check metrics`` (exposition format and lint) passes on ``text``."""
    promtool = require_binary("promtool")
    done = subprocess.run([promtool, "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=30)
    assert done.returncode == 0, (done.stdout + done.stderr).decode() + "\n--- text ---\n" + text


def samples(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_an_empty_watcher_renders_every_family_with_help_and_type() -> None:
    text = WatchMetrics(interval_s=10).render()
    for name, (kind, _, _) in METRICS.items():
        assert f"# TYPE {name} {kind}\n" in text
        assert f"# HELP {name} " in text
    # no scan yet: no dead-man timestamp (the rules' absent() sees it), counters at 0
    assert samples(text) == ["ckptwatch_watch_scans_total 0", "ckptwatch_watch_interval_seconds 10",
                             "ckptwatch_watch_series 0", "ckptwatch_watch_series_dropped_total 0"]
    promtool_check(text)


def test_a_job_in_flight_and_a_finished_one() -> None:
    m = WatchMetrics(interval_s=2)
    m.set_job("hung", "pool", inflight_s=42.5, timeout_s=60, unfinished_ranks=2)
    m.set_job("done", "local", inflight_s=0.0, timeout_s=None, unfinished_ranks=np.int64(0))
    m.set_last_barrier("done", "local", 21.25)
    m.mark_scan(1_764_288_000.5, 0.125)
    text = m.render()
    assert samples(text) == [
        'ckptwatch_checkpoint_inflight_seconds{job_id="done",tier="local"} 0',
        'ckptwatch_checkpoint_inflight_seconds{job_id="hung",tier="pool"} 42.5',
        # the timeout of "done" is unknown: no series rather than a made-up value
        'ckptwatch_checkpoint_timeout_seconds{job_id="hung",tier="pool"} 60',
        'ckptwatch_checkpoint_unfinished_ranks{job_id="done",tier="local"} 0',
        'ckptwatch_checkpoint_unfinished_ranks{job_id="hung",tier="pool"} 2',
        'ckptwatch_checkpoint_last_barrier_seconds{job_id="done",tier="local"} 21.25',
        "ckptwatch_watch_last_scan_timestamp_seconds 1764288000.5",
        "ckptwatch_watch_scan_duration_seconds 0.125",
        "ckptwatch_watch_scans_total 1",
        "ckptwatch_watch_interval_seconds 2",
        "ckptwatch_watch_series 2",
        "ckptwatch_watch_series_dropped_total 0",
    ]
    promtool_check(text)


def test_the_duration_histogram_counts_each_rank_in_its_bucket() -> None:
    assert DURATION_BUCKETS_S[0] == 1 and DURATION_BUCKETS_S[-1] == 3600
    assert list(DURATION_BUCKETS_S) == sorted(set(DURATION_BUCKETS_S))
    m = WatchMetrics()
    for seconds in (0.0, 1.0, 1.0001, 59.0, 60.0, 3600.0, 5000.0):  # le is "less or equal"
        m.observe_duration("j", "pool", seconds)
    text = m.render()
    got = {line.split('le="')[1].split('"')[0]: int(line.rsplit(" ", 1)[1])
           for line in samples(text) if "_bucket{" in line}
    assert got == {"1": 2, "2": 3, "5": 3, "10": 3, "20": 3, "30": 3, "60": 5, "120": 5,
                   "300": 5, "600": 5, "1200": 5, "1800": 5, "3600": 6, "+Inf": 7}
    assert 'ckptwatch_checkpoint_duration_seconds_count{job_id="j",tier="pool"} 7' in text
    total = float(text.split('ckptwatch_checkpoint_duration_seconds_sum{job_id="j",tier="pool"} ')
                  [1].split("\n")[0])
    assert total == pytest.approx(0 + 1 + 1.0001 + 59 + 60 + 3600 + 5000)
    promtool_check(text)


@pytest.mark.parametrize("job_id", HOSTILE_JOB_IDS, ids=range(len(HOSTILE_JOB_IDS)))
def test_hostile_job_ids_cannot_break_or_forge_a_line(job_id: str) -> None:
    m = WatchMetrics()
    m.set_job(job_id, 'ti"er\n', inflight_s=1, timeout_s=60, unfinished_ranks=1)
    m.observe_duration(job_id, 'ti"er\n', 3)
    m.mark_scan(1.0, 0.1)
    text = m.render()
    promtool_check(text)
    lines = samples(text)
    # one line per series: 3 gauges + 14 buckets + sum + count + 6 watcher lines
    assert len(lines) == 3 + len(DURATION_BUCKETS_S) + 1 + 2 + 6
    inflight = [line for line in lines if line.startswith("ckptwatch_checkpoint_inflight_")]
    assert len(inflight) == 1 and inflight[0].endswith(" 1")  # no forged series
    assert not any(c in text for c in "\x00\x1b\x07\x7f\x9b\r\t")  # terminal-safe
    label = escape_label_value(job_id)
    assert f'{{job_id="{label}",tier="ti\\"er\\\\n"}} 1' in text


def test_escape_label_value() -> None:
    assert escape_label_value('a"b\\c') == 'a\\"b\\\\c'
    assert escape_label_value("a\nb") == "a\\\\nb"  # shown as \n, as ckptwatch prints it
    assert escape_label_value("\x1b[2J") == "\\\\x1b[2J"
    assert escape_label_value("作业 ✓") == "作业 ✓"
    assert escape_label_value("\ud800") == "\\\\ud800"


def test_the_series_cap_drops_the_least_recently_updated_and_counts_it() -> None:
    m = WatchMetrics(max_series=2)
    m.set_job("a", "pool", inflight_s=1, timeout_s=60, unfinished_ranks=1)
    m.set_job("b", "pool", inflight_s=1, timeout_s=60, unfinished_ranks=1)
    m.observe_duration("a", "pool", 5)  # "a" updated last: "b" is now the oldest
    m.set_job("c", "local", inflight_s=1, timeout_s=60, unfinished_ranks=1)
    text = m.render()
    assert 'job_id="b"' not in text
    assert 'job_id="a"' in text and 'job_id="c"' in text
    assert "ckptwatch_watch_series 2\n" in text
    assert "ckptwatch_watch_series_dropped_total 1\n" in text
    m.set_last_barrier("d", "pool", 3)
    assert "ckptwatch_watch_series_dropped_total 2\n" in m.render()
    assert 'job_id="a"' not in m.render()


def test_forget_job_removes_every_series_of_that_job_and_tier() -> None:
    m = WatchMetrics()
    for tier in ("pool", "local"):
        m.set_job("gone", tier, inflight_s=3, timeout_s=60, unfinished_ranks=1)
        m.observe_duration("gone", tier, 2)
        m.set_last_barrier("gone", tier, 2)
    m.forget_job("gone", "pool")
    m.forget_job("never-seen", "pool")  # nothing to forget: no error
    text = m.render()
    assert 'tier="pool"' not in text
    assert len([s for s in samples(text) if 'tier="local"' in s]) == 4 + len(DURATION_BUCKETS_S) + 3
    assert "ckptwatch_watch_series_dropped_total 0\n" in text  # forgotten is not dropped


@pytest.mark.parametrize(("call", "message"), [
    (lambda m: m.set_job("j", "pool", inflight_s=-1, timeout_s=60, unfinished_ranks=0),
     "metrics of job 'j' tier 'pool': inflight_s must be a finite number >= 0, got -1"),
    (lambda m: m.set_job("j", "pool", inflight_s=math.nan, timeout_s=60, unfinished_ranks=0),
     "metrics of job 'j' tier 'pool': inflight_s must be a finite number >= 0, got nan"),
    (lambda m: m.set_job("j", "pool", inflight_s=1, timeout_s=0, unfinished_ranks=0),
     "metrics of job 'j' tier 'pool': timeout_s must be a finite number > 0, got 0"),
    (lambda m: m.set_job("j", "pool", inflight_s=1, timeout_s=60, unfinished_ranks=2.5),
     "metrics of job 'j' tier 'pool': unfinished_ranks must be an integer >= 0, got 2.5"),
    (lambda m: m.set_job("j", "pool", inflight_s=1, timeout_s=60, unfinished_ranks=-1),
     "metrics of job 'j' tier 'pool': unfinished_ranks must be an integer >= 0, got -1"),
    (lambda m: m.observe_duration("j", "local", math.inf),
     "metrics of job 'j' tier 'local': rank duration must be a finite number >= 0, got inf"),
    (lambda m: m.set_last_barrier("j", "local", -0.5),
     "metrics of job 'j' tier 'local': barrier time must be a finite number >= 0, got -0.5"),
    (lambda m: m.mark_scan(1.0, -1.0),
     "watcher metrics: scan duration must be a finite number >= 0, got -1.0"),
])
def test_bad_values_are_refused_saying_which_job_and_value(
        call: Callable[[WatchMetrics], object], message: str) -> None:
    m = WatchMetrics()
    with pytest.raises(ValueError) as info:
        call(m)
    assert str(info.value) == message
    assert samples(m.render())[0] == "ckptwatch_watch_scans_total 0"  # nothing half-set


def test_concurrent_updates_and_renders_lose_no_observation() -> None:
    m = WatchMetrics()
    errors: list[BaseException] = []

    def observe(tier: str) -> None:
        for i in range(3000):
            m.observe_duration("j", tier, float(i % 50))

    def render() -> None:
        try:
            for _ in range(50):
                assert m.render().endswith("\n")
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=observe, args=(t,)) for t in ("a", "a", "b", "b")]
    threads.append(threading.Thread(target=render))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    text = m.render()
    assert 'ckptwatch_checkpoint_duration_seconds_count{job_id="j",tier="a"} 6000' in text
    assert 'ckptwatch_checkpoint_duration_seconds_bucket{job_id="j",tier="b",le="+Inf"} 6000' \
        in text


def test_constructor_limits() -> None:
    with pytest.raises(ValueError, match="max_series must be at least 1, got 0"):
        WatchMetrics(max_series=0)
    with pytest.raises(ValueError, match="interval_s must be a finite number > 0, got 0"):
        WatchMetrics(interval_s=0)


# -- the textfile collector's file ------------------------------------------------------------


def test_write_textfile_replaces_the_file_whole(tmp_path: Path) -> None:
    path = tmp_path / "ckptwatch.prom"
    path.write_text("old\n")
    m = WatchMetrics()
    m.set_job("j", "pool", inflight_s=5, timeout_s=60, unfinished_ranks=1)
    write_textfile(path, m.render())
    assert path.read_text() == m.render()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckptwatch.prom"]  # no temp left


def test_write_textfile_leaves_the_old_file_when_the_write_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "ckptwatch.prom"
    path.write_text("old\n")
    seen: list[str] = []

    def refuse(src: object, dst: object) -> None:
        seen.append(Path(str(src)).name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(LakeError, match=f"cannot write {path}: the disk is full"):
        write_textfile(path, "new\n")
    assert path.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckptwatch.prom"]
    # the temp name is not *.prom: node_exporter's collector never reads a half-written file
    assert seen and not seen[0].endswith(".prom")


# -- the HTTP server --------------------------------------------------------------------------


def get(url: str, method: str = "GET") -> tuple[int, str, str]:
    req = urllib.request.Request(url, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.headers["Content-Type"], resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


def test_the_server_answers_metrics_and_404_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    m = WatchMetrics()
    m.set_job("j", "pool", inflight_s=7, timeout_s=60, unfinished_ranks=3)
    with MetricsServer(m) as server:
        assert server.host == "127.0.0.1" and server.port > 0
        base = f"http://127.0.0.1:{server.port}"
        status, ctype, body = get(f"{base}/metrics")
        assert (status, ctype, body) == (200, CONTENT_TYPE, m.render())
        assert get(f"{base}/metrics?name[]=x")[0] == 200
        assert get(f"{base}/metrics", "HEAD")[:2] == (200, CONTENT_TYPE)
        for path in ("/", "/metrics/", "/api/v1/query", "/../metrics"):
            assert get(base + path)[0] == 404, path
        m.set_job("j", "pool", inflight_s=9, timeout_s=60, unfinished_ranks=3)
        assert 'ckptwatch_checkpoint_inflight_seconds{job_id="j",tier="pool"} 9\n' \
            in get(f"{base}/metrics")[2]  # rendered per request, not cached
    out, err = capfd.readouterr()
    assert (out, err) == ("", "")  # no request log
    with pytest.raises(urllib.error.URLError):
        get(f"{base}/metrics")  # stopped: the port is closed


def test_a_port_in_use_is_a_usage_error_naming_it() -> None:
    with MetricsServer(WatchMetrics()) as first, pytest.raises(UsageError) as info:
        MetricsServer(WatchMetrics(), "127.0.0.1", first.port)
    assert str(info.value).startswith(
        f"cannot serve metrics on 127.0.0.1:{first.port} (--metrics-port): Address already in use")


def test_the_server_on_a_chosen_port_and_ipv6_loopback() -> None:
    port = free_port()
    with MetricsServer(WatchMetrics(), "127.0.0.1", port) as server:
        assert server.port == port
        assert get(f"http://127.0.0.1:{port}/metrics")[0] == 200
    try:
        v6 = MetricsServer(WatchMetrics(), "::1", 0)
    except UsageError:
        pytest.skip("no IPv6 loopback on this machine")
    with v6:
        assert get(f"http://[::1]:{v6.port}/metrics")[0] == 200


# -- a real Prometheus ------------------------------------------------------------------------


def test_prometheus_scrapes_the_in_flight_series(prometheus: Prometheus,
                                                 metrics_target: MetricsTarget) -> None:
    m = metrics_target.metrics
    m.set_job("llama-70b", "pool", inflight_s=42.5, timeout_s=60, unfinished_ranks=2)
    m.set_job("healthy", "local", inflight_s=0, timeout_s=600, unfinished_ranks=0)
    hostile = 'job "x"\\\n\x1b ü'
    m.set_job(hostile, "pool", inflight_s=3, timeout_s=60, unfinished_ranks=1)
    m.mark_scan(1_764_288_000.0, 0.2)

    result = prometheus.wait_for(
        'ckptwatch_checkpoint_inflight_seconds{job_id="llama-70b"}', lambda r: len(r) == 1)
    (got,) = result
    assert got["metric"] == {"__name__": "ckptwatch_checkpoint_inflight_seconds",
                             "job_id": "llama-70b", "tier": "pool", "job": "ckptwatch",
                             "instance": metrics_target.address}
    assert float(got["value"][1]) == 42.5
    healthy = prometheus.query('ckptwatch_checkpoint_inflight_seconds{job_id="healthy"}')
    assert [(r["metric"]["tier"], float(r["value"][1])) for r in healthy] == [("local", 0.0)]
    # the hostile id arrives as one series, its label the terminal-safe text ckptwatch prints
    ids = {r["metric"]["job_id"]
           for r in prometheus.query("ckptwatch_checkpoint_unfinished_ranks"
                                     f'{{instance="{metrics_target.address}"}}')}
    assert ids == {"llama-70b", "healthy", 'job "x"\\\\n\\x1b ü'}
    # the rules loaded beside it: the recording rule gives the in-flight/timeout ratio
    ratio = prometheus.wait_for(
        'job_id_tier:ckptwatch_checkpoint_inflight_timeout:ratio{job_id="llama-70b"}',
        lambda r: len(r) == 1)
    assert float(ratio[0]["value"][1]) == pytest.approx(42.5 / 60)
