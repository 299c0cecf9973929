"""Fault injection, the caches: corrupt, stale, misplaced, unwritable, shared, raced and
killed (issue 14).  The compiled records and the search index are derived data: any
damage is rebuilt or worked around, never fatal and never shown as an answer; kb only
ever deletes what it created."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.conftest import operator_yaml
from tests.fault_helpers import REPO, env_for, kb, one_operator

# a minute or more of CPU: started first (see the heavy marker in pyproject.toml)
pytestmark = pytest.mark.heavy


def _records_db(tmp: Path) -> Path:
    (db,) = (tmp / "cache").glob("records-*.sqlite")
    return db


def _index(tmp: Path) -> Path:
    (ix,) = [d for d in (tmp / "cache").glob("index-*") if d.is_dir()]
    return ix


def test_corrupt_record_pages_are_healed(tmp_path: Path) -> None:
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0
    db = _records_db(tmp_path)
    data = bytearray(db.read_bytes())
    for i in range(3 * 4096, len(data)):  # keep the meta table readable, break the records
        data[i] ^= 0x55
    db.write_bytes(bytes(data))
    for _ in range(2):
        run = kb(tmp_path, "show", "npu_rms_norm")
        assert run.clean and run.rc == 0 and run.out.startswith("npu_rms_norm"), run.err


def test_bit_rot_in_a_cached_body_is_caught(tmp_path: Path) -> None:
    root = one_operator(tmp_path / "rec")
    assert kb(tmp_path, "show", "npu_test_op", records=root).rc == 0
    db = _records_db(tmp_path)
    data = db.read_bytes()
    at = data.find(b"A small operator")
    db.write_bytes(data[:at] + b"A small oqerator" + data[at + 16 :])
    run = kb(tmp_path, "show", "npu_test_op", records=root)
    assert run.clean and run.rc == 0
    assert "A small operator" in run.out and "oqerator" not in run.out


@pytest.mark.parametrize("name", ["terms.sqlite", "docs.json"])
@pytest.mark.parametrize("part", [(10, 20), (10, 90)])
def test_corrupt_index_files_are_rebuilt(tmp_path: Path, part: tuple[int, int], name: str) -> None:
    before = kb(tmp_path, "search", "rms norm")
    assert before.rc == 0 and before.out.startswith("npu_rms_norm")
    (seg,) = _index(tmp_path).glob(name)
    data = bytearray(seg.read_bytes())
    for i in range(len(data) * part[0] // 100, len(data) * part[1] // 100):
        data[i] ^= 0x5A  # the header and the trailing directory stay readable
    seg.write_bytes(bytes(data))
    for _ in range(2):
        run = kb(tmp_path, "search", "rms norm")
        assert run.clean and run.rc == 0, run.err
        names = [line for line in run.out.splitlines() if not line.startswith(" ")]
        expected = [line for line in before.out.splitlines() if not line.startswith(" ")]
        assert names[0] == expected[0] and sorted(names) == sorted(expected), run.out


def test_bit_rot_in_the_stored_fields_is_caught(tmp_path: Path) -> None:
    """docs.json (the stored fields the ranking reads) is checked like the segments:
    one changed letter of a name, same size, is caught and rebuilt, never shown."""
    before = kb(tmp_path, "search", "rms norm")
    assert before.rc == 0 and before.out.startswith("npu_rms_norm")
    (docs,) = _index(tmp_path).glob("docs.json")
    data = docs.read_bytes()
    assert b'"npu_rms_norm"' in data
    docs.write_bytes(data.replace(b'"npu_rms_norm"', b'"npu_rms_nore"', 1))
    run = kb(tmp_path, "search", "rms norm")
    assert run.clean and run.rc == 0 and run.out == before.out, run.out
    assert b'"npu_rms_nore"' not in docs.read_bytes()  # healed on disk, not just in memory


def test_bit_rot_in_the_term_table_is_caught(tmp_path: Path) -> None:
    """terms.sqlite (every term's scores, what a cold query reads instead of whoosh) is
    checked like the segments: a changed score, same size, is caught and rebuilt."""
    before = kb(tmp_path, "search", "rms norm")
    assert before.rc == 0 and before.out.startswith("npu_rms_norm")
    (table,) = _index(tmp_path).glob("terms.sqlite")
    data = bytearray(table.read_bytes())
    con = sqlite3.connect(table)
    try:  # a row's packed scores, where they lie in the file
        at = next(
            i for (blob,) in con.execute("SELECT scores FROM terms") if (i := data.find(blob)) > 0
        )
    finally:
        con.close()
    data[at] ^= 0x10  # one bit of a score
    table.write_bytes(bytes(data))
    run = kb(tmp_path, "search", "rms norm")
    assert run.clean and run.rc == 0 and run.out == before.out, run.out
    assert table.read_bytes() != bytes(data)  # healed on disk, not just in memory


def test_an_index_file_the_build_did_not_write_is_not_trusted(tmp_path: Path) -> None:
    """A stray file in the index (an older kb's whoosh table of contents, a restored
    backup) is nothing the stamp vouches for, so the index is rebuilt."""
    before = kb(tmp_path, "search", "rms norm")
    stray = _index(tmp_path) / "_MAIN_99.toc"
    stray.write_bytes(b"\x00" * 64)
    run = kb(tmp_path, "search", "rms norm")
    assert run.clean and run.rc == 0 and run.out == before.out, run.err
    assert not list(_index(tmp_path).glob("_MAIN_99.toc"))


def test_a_file_where_the_index_goes_is_left_alone(tmp_path: Path) -> None:
    assert kb(tmp_path, "search", "rms norm").rc == 0
    ix = _index(tmp_path)
    shutil.rmtree(ix)
    ix.write_text("mine")
    run = kb(tmp_path, "search", "rms norm")
    assert run.clean and run.rc == 0 and "npu_rms_norm" in run.out
    assert len(run.err.strip().splitlines()) == 1 and "not kb's" in run.err
    assert ix.read_text() == "mine"


def test_an_unusable_cache_dir_means_working_uncached(tmp_path: Path) -> None:
    for cache in ("/proc/kb-cache", str(tmp_path / "file")):
        (tmp_path / "file").write_text("x")
        for args in (("show", "npu_rms_norm"), ("search", "rms norm"), ("index",)):
            run = kb(tmp_path, *args, KB_CACHE_DIR=cache)
            assert run.clean and run.rc == 0, (cache, args, run.err)
            assert len(run.err.strip().splitlines()) == 1 and "working without a cache" in run.err


def test_an_edit_that_restores_size_and_mtime_is_seen(tmp_path: Path) -> None:
    root = one_operator(tmp_path / "rec")
    record = root / "operators" / "npu_test_op.yaml"
    assert kb(tmp_path, "search", "testing", records=root).rc == 0
    shutil.copy2(record, tmp_path / "reference")
    record.write_text(operator_yaml().replace("A small operator", "A SMALL operator"))
    subprocess.run(["touch", "-r", str(tmp_path / "reference"), str(record)], check=True)
    run = kb(tmp_path, "show", "npu_test_op", records=root)
    assert "A SMALL operator" in run.out
    # cp -p brings back the old bytes with their old times: the cache follows again
    subprocess.run(["cp", "-p", str(tmp_path / "reference"), str(record)], check=True)
    assert "A small operator" in kb(tmp_path, "show", "npu_test_op", records=root).out


def test_the_cache_deletes_only_what_it_created(tmp_path: Path) -> None:
    photos = tmp_path / "cache" / "index-of-my-photos"
    photos.mkdir(parents=True)
    (photos / "cat.jpg").write_text("meow")
    lookalike = tmp_path / "cache" / "index-8-0123456789abcdef-0123456789abcdef0123456789abcdef"
    lookalike.mkdir()
    assert kb(tmp_path, "index", "--rebuild").rc == 0
    assert kb(tmp_path, "index", "--rebuild").rc == 0
    assert (photos / "cat.jpg").read_text() == "meow" and lookalike.is_dir()


def test_two_record_trees_share_a_cache_without_deleting_each_other(tmp_path: Path) -> None:
    a = one_operator(tmp_path / "A")
    b = one_operator(tmp_path / "B", operator_yaml("npu_other_op"), name="npu_other_op")
    assert kb(tmp_path, "search", "testing", records=a).rc == 0
    first = {d.name for d in (tmp_path / "cache").glob("index-*")}
    assert kb(tmp_path, "search", "testing", records=b).rc == 0
    both = {d.name for d in (tmp_path / "cache").glob("index-*")}
    assert first < both and len(both) == 2
    # a changed tree replaces its own old index, not the other tree's
    (a / "operators" / "npu_test_op.yaml").write_text(operator_yaml(keyword="changed"))
    assert kb(tmp_path, "search", "changed", records=a).rc == 0
    after = {d.name for d in (tmp_path / "cache").glob("index-*")}
    assert len(after) == 2 and (both - first) <= after and not (first & after)


def _concurrently(tmp: Path, args: tuple[str, ...], n: int) -> list[tuple[int | None, str]]:
    with ThreadPoolExecutor(n) as pool:
        runs = list(pool.map(lambda _: kb(tmp, *args, timeout=120), range(n)))
    return [(r.rc, r.err) for r in runs]


def test_concurrent_cold_searches_all_answer(tmp_path: Path) -> None:
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0  # compiled; the index is cold
    for _ in range(2):
        for ix in (tmp_path / "cache").glob("index-*"):
            shutil.rmtree(ix)
        results = _concurrently(tmp_path, ("search", "rms norm"), 8)
        assert [rc for rc, _ in results] == [0] * 8, [err for _, err in results if err][:2]


def test_concurrent_rebuilds_all_succeed(tmp_path: Path) -> None:
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0
    results = _concurrently(tmp_path, ("index", "--rebuild"), 8)
    results += _concurrently(tmp_path, ("index", "--rebuild", "--all"), 2)
    assert [rc for rc, _ in results] == [0] * 10, [err for _, err in results if err][:2]
    assert kb(tmp_path, "search", "rms norm").rc == 0


def test_a_killed_build_leaves_nothing_behind(tmp_path: Path) -> None:
    shipped = REPO / "kb" / "records"  # big enough that a kill lands inside the build
    assert kb(tmp_path, "show", "npu_rms_norm", records=shipped).rc == 0
    cache = tmp_path / "cache"
    for _ in range(2):
        proc = subprocess.Popen(
            [sys.executable, "-m", "kb", "index", "--rebuild"],
            cwd=tmp_path,
            env=env_for(tmp_path, shipped),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while not list(cache.glob(".kb-tmp-*")) and time.monotonic() < deadline:
            time.sleep(0.005)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert list(cache.glob(".kb-tmp-*")), "the kills should have hit a build"
    run = kb(tmp_path, "search", "rms norm", records=shipped)
    assert run.clean and run.rc == 0
    assert list(cache.glob(".kb-tmp-*")) == []


def test_a_build_killed_while_writing_its_marker_is_cleaned(tmp_path: Path) -> None:
    # the window the kill test can hit: temp dir made, marker created but still empty
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    cache = tmp_path / "cache"
    half = cache / f".kb-tmp-0123456789abcdef-index-{dead.pid}-abc"
    half.mkdir()
    (half / ".kb-owned").write_text("", encoding="utf-8")
    foreign = cache / f".kb-tmp-0123456789abcdef-index-{dead.pid}-def"
    foreign.mkdir()
    (foreign / ".kb-owned").write_text("", encoding="utf-8")
    (foreign / "notes.txt").write_text("not kb's", encoding="utf-8")
    assert kb(tmp_path, "search", "rms norm").rc == 0
    assert not half.exists()
    assert (foreign / "notes.txt").exists()  # anything else in it: never deleted


def test_the_compiled_cache_is_sqlite_with_a_checksum_per_body(tmp_path: Path) -> None:
    assert kb(tmp_path, "show", "npu_rms_norm").rc == 0
    con = sqlite3.connect(_records_db(tmp_path))
    columns = [row[1] for row in con.execute("PRAGMA table_info(records)")]
    assert columns[-1] == "digest"
    assert con.execute("SELECT COUNT(DISTINCT digest) FROM records").fetchone()[0] > 10
