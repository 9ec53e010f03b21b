"""The log store and its index, on SQLite and PostgreSQL, with a directory and memory://:
lines round-trip with stream and time, pages resume after a position, rotation keeps the
head and the tail and says what went, a second writer of an attempt continues after the
first, and `follow` yields lines as they are flushed."""

from __future__ import annotations

import asyncio
import importlib.util
import secrets
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sluice.clock import FakeClock
from sluice.config import LogsConfig
from sluice.errors import InvalidArgumentError, MissingDependencyError
from sluice.logs import LogFiles, Position, TaskLogSink, log_store_url
from sluice.logs.lines import LogLine, check_stream, split_text
from sluice.logs.reader import LogReader
from sluice.store.store import Store

T0 = 1_700_000_000.0


@pytest.fixture
async def store(store_url: str) -> AsyncIterator[Store]:
    opened = await Store.open(store_url, upgrade=True)
    yield opened
    await opened.close()


@pytest.fixture(params=["file", "memory"])
def files(request: pytest.FixtureRequest, tmp_path: Path) -> LogFiles:
    if request.param == "file":
        return LogFiles.from_url((tmp_path / "logs").as_uri())
    return LogFiles.from_url(f"memory://sluice-test-{secrets.token_hex(4)}")


def sink_on(store: Store, files: LogFiles, clock: FakeClock, **config: int) -> TaskLogSink:
    return TaskLogSink(files, store.db, clock, LogsConfig(**config), f"w-{secrets.token_hex(2)}")


async def test_lines_round_trip_with_stream_and_time(store: Store, files: LogFiles) -> None:
    clock = FakeClock(T0)
    sink = sink_on(store, files, clock)
    log = sink.writer("ex1", "train", 0)
    log.write("one\ntwo\n")
    clock.advance(1)
    log.write("oops", "stderr")
    log.write("later", at=T0 + 5)
    sink.end("ex1", "train", 0)
    await sink.flush()
    entries = await LogReader(store.db, files).lines("ex1", "train")
    assert [(e.line.at, e.line.stream, e.line.text) for e in entries] == [
        (T0, "stdout", "one"),
        (T0, "stdout", "two"),
        (T0 + 1, "stderr", "oops"),
        (T0 + 5, "stdout", "later"),
    ]
    [segment] = await LogReader(store.db, files).segments("ex1")
    assert (segment.lines, segment.first_at, segment.last_at) == (4, T0, T0 + 5)
    assert segment.closed_at == T0 + 1
    assert segment.bytes == sum(len(e.line.encode()) for e in entries)


async def test_pages_resume_after_a_position_and_filter_streams(
    store: Store, files: LogFiles
) -> None:
    clock = FakeClock(T0)
    sink = sink_on(store, files, clock, segment_bytes=256, max_bytes_per_attempt=1 << 20)
    for attempt in (0, 1):
        log = sink.writer("ex2", "n", attempt)
        for i in range(30):
            log.write(f"a{attempt} line {i}", "stderr" if i % 3 == 0 else "stdout")
        sink.end("ex2", "n", attempt)
    await sink.flush()
    reader = LogReader(store.db, files)
    everything = await reader.lines("ex2", "n")
    assert len(everything) == 60
    assert len(await reader.segments("ex2", "n", 0)) > 2  # rotated at 256 bytes
    paged, after = [], None
    while True:
        page = await reader.page("ex2", "n", after=after, limit=7)
        paged += page.entries
        after = page.after
        if not page.more:
            break
    assert paged == everything
    last = await reader.tail("ex2", "n", 1, 5)
    assert [e.line.text for e in last] == [f"a1 line {i}" for i in range(25, 30)]
    assert [e.line.text for e in await reader.tail("ex2", "n", None, 2, "stderr")] == [
        "a1 line 24",
        "a1 line 27",
    ]
    assert await reader.tail("ex2", "n", 0, 0) == []
    errors = await reader.page("ex2", "n", 1, stream="stderr", limit=100)
    assert [e.line.text for e in errors.entries] == [f"a1 line {i}" for i in range(0, 30, 3)]
    assert not errors.more


async def test_past_the_limit_the_head_and_the_tail_are_kept(store: Store, files: LogFiles) -> None:
    clock = FakeClock(T0)
    sink = sink_on(store, files, clock, segment_bytes=512, max_bytes_per_attempt=2048)
    log = sink.writer("ex3", "big", 0)
    for i in range(200):
        log.write(f"line {i:04d} " + "x" * 40)
        if i % 20 == 0:
            await sink.flush()
    sink.end("ex3", "big", 0)
    await sink.flush()
    reader = LogReader(store.db, files)
    segments = await reader.segments("ex3", "big", 0)
    live = [s for s in segments if not s.removed]
    assert sum(s.bytes for s in live) <= 2048
    removed = [s for s in segments if s.removed]
    assert removed and all(not files.read(s.uri) for s in removed)
    assert sum(s.lines for s in segments) == 200  # every line is counted, kept or not
    texts = [e.line.text for e in await reader.lines("ex3", "big")]
    assert texts[0].startswith("line 0000")  # the head
    assert texts[-1].startswith("line 0199")  # the tail
    notes = [e for e in await reader.lines("ex3", "big") if e.note]
    assert len(notes) == len(removed) and "removed" in notes[0].line.text


async def test_a_second_writer_continues_after_the_first(store: Store, files: LogFiles) -> None:
    clock = FakeClock(T0)
    first = sink_on(store, files, clock)
    first.writer("ex4", "n", 0).write("before the crash")
    await first.flush()  # flushed, never ended: as an engine killed mid-task leaves it
    second = sink_on(store, files, clock)
    second.writer("ex4", "n", 0).write("after the restart")
    second.end("ex4", "n", 0)
    await second.flush()
    reader = LogReader(store.db, files)
    segments = await reader.segments("ex4", "n", 0)
    assert [s.segment for s in segments] == [0, 1]
    assert all(s.closed_at is not None for s in segments)
    assert segments[0].writer != segments[1].writer
    texts = [e.line.text for e in await reader.lines("ex4", "n")]
    assert texts == ["before the crash", "after the restart"]


async def test_follow_yields_lines_as_they_are_flushed(store: Store, files: LogFiles) -> None:
    clock = FakeClock(T0)
    sink = sink_on(store, files, clock)
    reader = LogReader(store.db, files)
    log = sink.writer("ex5", "n", 0)  # no node row: follow ends once the log is closed
    seen: list[str] = []

    async def follow() -> None:
        async for entry in reader.follow("ex5", "n", 0, poll=0.01, grace=0.0):
            seen.append(entry.line.text)

    log.write("first")
    await sink.flush()
    follower = asyncio.create_task(follow())
    for text in ("second", "third"):
        await asyncio.sleep(0.05)
        log.write(text)
        await sink.flush()
    sink.end("ex5", "n", 0)
    await sink.flush()
    await asyncio.wait_for(follower, 10)
    assert seen == ["first", "second", "third"]


async def test_lines_past_the_buffer_are_dropped_and_counted(store: Store, files: LogFiles) -> None:
    clock = FakeClock(T0)
    sink = sink_on(store, files, clock, segment_bytes=4096, max_bytes_per_attempt=1 << 24)
    log = sink.writer("ex6", "n", 0)
    for i in range(10_000):  # never flushed meanwhile: a log store that fell behind
        log.write(f"line {i} " + "y" * 200)
    sink.end("ex6", "n", 0)
    await sink.flush()
    segments = await LogReader(store.db, files).segments("ex6", "n", 0)
    kept, dropped = sum(s.lines for s in segments), sum(s.dropped_lines for s in segments)
    assert kept + dropped == 10_000 and dropped > 0
    notes = [e for e in await LogReader(store.db, files).lines("ex6", "n") if e.note]
    assert notes and "dropped" in notes[-1].line.text


def test_split_text_and_bad_values() -> None:
    assert split_text("a\nb\n") == ["a", "b"]
    assert split_text("a\n\nb") == ["a", "", "b"]
    assert split_text("") == []
    assert split_text("x" * 70_000)[0].endswith("characters cut]")
    with pytest.raises(InvalidArgumentError, match="'stdin'"):
        check_stream("stdin")
    with pytest.raises(InvalidArgumentError, match="'1:2'"):
        Position.parse("1:2")
    assert str(Position.parse("1:2:3")) == "1:2:3"
    assert LogLine.decode(b'{"t": 1, "s": "stdout"') is None


def test_log_store_urls(tmp_path: Path) -> None:
    default = log_store_url(LogsConfig(), f"sqlite:///{tmp_path}/db/sluice.db")
    assert default == (tmp_path / "db" / "logs").as_uri()
    assert log_store_url(LogsConfig(url="memory://x"), "sqlite:///a.db") == "memory://x"
    with pytest.raises(InvalidArgumentError, match="nope://x"):
        LogFiles.from_url("nope://x")
    absent = _protocol_without_its_driver()
    with pytest.raises(MissingDependencyError, match=f"{absent}://bucket/logs"):
        LogFiles.from_url(f"{absent}://bucket/logs")


def _protocol_without_its_driver() -> str:
    """An fsspec protocol whose package is not installed here (which ones are depends on the
    extras: flytekit brings s3fs and gcsfs)."""
    from fsspec.registry import known_implementations

    for protocol, spec in sorted(known_implementations.items()):
        if importlib.util.find_spec(spec["class"].split(".")[0]) is None:
            return protocol
    pytest.fail("every fsspec driver is installed")
