"""Fault injection, the record tree: odd entries on disk, bad values in records, and a
broken store seen from every verb (issue 14).  Every verb must agree on what a record
file is, say where a problem is, and exit 2 for a store it cannot use."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import operator_yaml
from tests.fault_helpers import HEAD, kb, one_operator, tree

VERBS = [
    ("show", "npu_test_op"),
    ("search", "testing"),
    ("list",),
    ("index",),
    ("check", "c.yaml"),
    ("validate",),
    ("tree", "attention"),
    ("advise", "attention"),
]


def test_a_directory_named_like_a_record_is_a_directory(tmp_path: Path) -> None:
    root = one_operator(tmp_path / "rec")
    (root / "junk.yaml").mkdir()
    (root / "notes.yml").mkdir()
    for args in (("validate",), ("show", "npu_test_op"), ("search", "testing")):
        run = kb(tmp_path, *args, records=root)
        assert run.clean and run.rc == 0, (args, run.err)


def test_editor_lock_links_are_skipped_and_dangling_links_reported(tmp_path: Path) -> None:
    root = one_operator(tmp_path / "rec")
    os.symlink("user@host.4242:1700000000", root / "operators" / ".#npu_test_op.yaml")
    run = kb(tmp_path, "show", "npu_test_op", records=root)
    assert run.clean and run.rc == 0, run.err
    os.symlink("gone.yaml", root / "operators" / "npu_gone.yaml")
    run = kb(tmp_path, "validate", records=root)
    assert run.clean and run.rc == 2
    assert "operators/npu_gone.yaml:1:1: broken symbolic link (to 'gone.yaml')" in run.out
    run = kb(tmp_path, "show", "npu_test_op", records=root)
    assert run.clean and run.rc == 2 and "broken symbolic link" in run.err


def test_a_fifo_among_the_records_is_never_opened(tmp_path: Path) -> None:
    root = one_operator(tmp_path / "rec")
    os.mkfifo(root / "operators" / "npu_pipe.yaml")
    run = kb(tmp_path, "validate", records=root, timeout=30)
    assert run.rc == 2 and "npu_pipe.yaml:1:1: is a FIFO (named pipe), not a record file" in run.out


def test_colons_in_file_names_keep_positions_readable(tmp_path: Path) -> None:
    root = tree(
        tmp_path / "rec",
        {
            "operators/npu_test_op.yaml": operator_yaml(),
            "operators/a:b.yaml": "kind: operator\nname: [\n",
        },
    )
    run = kb(tmp_path, "validate", records=root)
    assert run.clean and run.rc == 2
    assert f"{root}/operators/a:b.yaml:3:1: YAML does not parse" in run.out


def test_an_empty_records_dir_says_so(tmp_path: Path) -> None:
    (tmp_path / "rec").mkdir()
    (tmp_path / "c.yaml").write_text(HEAD + "  - {module: m, operator: npu_rms_norm}\n")
    for args in (("check", "c.yaml"), ("show", "npu_rms_norm"), ("validate",)):
        run = kb(tmp_path, *args, records=tmp_path / "rec")
        assert run.clean and run.rc == 2, (args, run.err)
        assert f"0 records loaded from {tmp_path / 'rec'}" in run.out + run.err
        assert "unknown operator" not in run.out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda t: t + "since: 2024-13-45\n", "since: unknown field"),
        (
            lambda t: t.replace("allowed: [a, b]", f"allowed: [a, b, {'7' * 5000}]"),
            "is 5000 characters long",
        ),
        (
            lambda t: t.replace(
                "allowed: [a, b]", "allowed: [a, b]\n    range: {max: 1" + "0" * 400 + "}"
            ),
            "is 401 characters long",
        ),
        (
            lambda t: t.replace("description: A small", "description: A \x00small"),
            "npu_test_op.yaml:7:16: binary file (NUL bytes)",
        ),
    ],
    ids=["bad-date", "5000-digits", "10**400", "nul"],
)
def test_bad_values_in_a_record_are_problems_at_their_line(
    tmp_path: Path, change, message: str
) -> None:
    root = one_operator(tmp_path / "rec", change(operator_yaml()))
    for args in (("validate",), ("show", "npu_test_op"), ("search", "testing")):
        run = kb(tmp_path, *args, records=root)
        assert run.clean and run.rc == 2, (args, run.err)
        assert "operators/npu_test_op.yaml:" in run.out + run.err and message in run.out + run.err


def test_a_broken_store_exits_2_from_every_verb(tmp_path: Path) -> None:
    root = one_operator(
        tmp_path / "rec", operator_yaml().replace("status: stable", "status: stabel")
    )
    (tmp_path / "c.yaml").write_text(HEAD)
    codes = {args[0]: kb(tmp_path, *args, records=root).rc for args in VERBS}
    assert codes == {args[0]: 2 for args in VERBS}
    run = kb(tmp_path, "show", "--help", records=root)
    assert "2 for a broken record store" in " ".join(run.out.split())


# -- a record rewritten while kb validate reads the tree (issue 24, class E) ----------------


def _half_written(path: Path) -> None:
    """What a reader sees in the middle of a non-atomic save: the first part of the file,
    with a fresh modification time."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: len(text) // 2] + "\n  - [", encoding="utf-8")


@pytest.fixture
def rewritten(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, str]:
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    root = one_operator(tmp_path / "rec")
    path = root / "operators" / "npu_test_op.yaml"
    return root, path, path.read_text(encoding="utf-8")


def test_a_record_torn_during_the_load_is_read_again(rewritten, monkeypatch) -> None:
    import kb.catalog.store as store
    from kb.api.validate import validate

    root, path, good = rewritten
    real, calls = store.load_store, []

    def load_during_a_save(where: Path) -> store.StoreResult:
        calls.append(where)
        if len(calls) == 1:  # the writer is half-way when the reader passes, then finishes
            _half_written(path)
            try:
                return real(where)
            finally:
                path.write_text(good, encoding="utf-8")
        return real(where)

    monkeypatch.setattr(store, "load_store", load_during_a_save)
    found = validate(root)  # (the catalog build of the cross-checks loads the tree too)
    assert len(calls) >= 2 and not found.broken and found.problems == [], found.problems


def test_a_record_changed_before_the_cross_checks_is_not_a_traceback(
    rewritten, monkeypatch
) -> None:
    """The load saw a valid tree; the cross-checks reopen the catalog after a save began
    (before: StoreInvalid escaped as a traceback from kb validate)."""
    import kb.audit.crosscheck as crosscheck
    from kb.api.validate import validate

    root, path, good = rewritten
    real, calls = crosscheck.crosscheck, []

    def crosscheck_during_a_save(result, where):  # type: ignore[no-untyped-def]
        calls.append(where)
        if len(calls) == 1:
            _half_written(path)
            try:
                return real(result, where)
            finally:
                path.write_text(good, encoding="utf-8")
        return real(result, where)

    monkeypatch.setattr(crosscheck, "crosscheck", crosscheck_during_a_save)
    found = validate(root)
    assert len(calls) == 2 and not found.broken and found.problems == [], found.problems


def test_a_tree_that_never_settles_is_reported_not_looped_on(rewritten, monkeypatch) -> None:
    import kb.catalog.store as store
    from kb.api.validate import SNAPSHOT_TRIES, validate

    root, path, good = rewritten
    real, calls = store.load_store, []

    def always_saving(where: Path) -> store.StoreResult:
        calls.append(where)
        result = real(where)
        path.write_text(good + f"# save {len(calls)}\n", encoding="utf-8")
        return result

    monkeypatch.setattr(store, "load_store", always_saving)
    found = validate(root)
    assert len(calls) >= SNAPSHOT_TRIES and found.broken
    assert "kept changing while they were validated" in found.problems[-1].message
