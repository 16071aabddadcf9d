"""The build unpacks llama.cpp's source on Debian 12's own Python (3.11.2), which lacks tarfile's "data" filter,
and still refuses what that filter refuses."""

import io
import tarfile

import pytest

from scripts import llama_source


def archive(path, members: dict[str, str | None], links: dict[str, str] | None = None):
    """A tarball of files (name: text; None for a folder) and symlinks (name: target)."""
    with tarfile.open(path, "w:gz") as out:
        for name, text in members.items():
            info = tarfile.TarInfo(name)
            if text is None:
                info.type = tarfile.DIRTYPE
                out.addfile(info)
            else:
                data = text.encode()
                info.size = len(data)
                out.addfile(info, io.BytesIO(data))
        for name, target in (links or {}).items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            out.addfile(info)
    return path


@pytest.fixture(params=["with the filter", "without it (Python < 3.11.4)"])
def python(request, monkeypatch):
    if request.param.startswith("without"):
        monkeypatch.delattr(tarfile, "data_filter")
    return request.param


def test_it_unpacks_a_source_tree_with_its_links(python, tmp_path):
    tarball = archive(tmp_path / "ok.tar.gz", {"pkg": None, "pkg/a.txt": "hello"}, {"pkg/b.txt": "a.txt"})
    into = tmp_path / "into"
    into.mkdir()
    with tarfile.open(tarball) as opened:
        llama_source.extract_all(opened, into)
    assert (into / "pkg" / "b.txt").read_text() == "hello"


@pytest.mark.parametrize("members, links", [({"../outside.txt": "x"}, {}), ({}, {"pkg/passwd": "/etc/passwd"}),
                                            ({}, {"pkg/up": "../../x"})])
def test_it_refuses_what_would_land_outside(python, tmp_path, members, links):
    tarball = archive(tmp_path / "bad.tar.gz", members, links)
    into = tmp_path / "into"
    into.mkdir()
    with tarfile.open(tarball) as opened, pytest.raises((SystemExit, tarfile.FilterError)):
        llama_source.extract_all(opened, into)
    assert not (tmp_path / "outside.txt").exists()
