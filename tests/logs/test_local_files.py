"""The default log store (a plain absolute file:/// URL) runs without fsspec, with fsspec's
paths and URIs: segments written either way are found by the other."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

from sluice.logs.files import LocalFiles, LogFiles


def test_plain_file_urls_take_the_local_path_with_fsspecs_root(tmp_path: Path) -> None:
    url = (tmp_path / "logs").as_uri()
    files = LogFiles.from_url(url)
    assert isinstance(files.fs, LocalFiles) and files.appendable
    fs, root = fsspec.core.url_to_fs(url)
    assert files.root == root
    path = files.segment_path("x1", "node/a b", 1, 0)
    assert files.uri(path) == fs.unstrip_protocol(path)
    assert files._path(files.uri(path)) == fs._strip_protocol(fs.unstrip_protocol(path))


@pytest.mark.parametrize(
    "url",
    ["memory://logs", "file://relative/dir", "file:///tmp/a%20b", "/tmp/plain", "file:///a/../b"],
)
def test_anything_else_goes_to_fsspec(url: str) -> None:
    assert LocalFiles.root_of(url) is None


def test_write_read_remove_as_fsspec_does(tmp_path: Path) -> None:
    local = LogFiles.from_url((tmp_path / "logs").as_uri())
    remote = LogFiles(*fsspec.core.url_to_fs((tmp_path / "logs").as_uri()))
    path = local.segment_path("x1", "n", 1, 0)
    local.write(path, b"one\n", None)
    remote.write(path, b"two\n", None)
    uri = local.uri(path)
    assert local.read(uri) == remote.read(uri) == b"one\ntwo\n"
    assert local.read(uri, start=4) == b"two\n"
    local.remove(uri)
    local.remove(uri)  # gone already: nothing to do
    assert local.read(uri) == remote.read(uri) == b""
