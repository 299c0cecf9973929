"""The search index is built without whoosh's writer (issue 34): its term table and
stored fields are, term for term and float for float, what whoosh's writer indexes
and stores for the shipped records, and an index on disk holds no whoosh segment."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kb.catalog.compiled import open_catalog
from kb.index import searchindex


def _whoosh_built(catalog: Any) -> tuple[dict[str, dict[int, float]], dict[int, dict[str, Any]]]:
    """The scores of what whoosh's own writer indexes, and the fields it stores."""
    from whoosh.filedb.filestore import RamStorage

    from kb.index.documents import schema
    from kb.index.names import name_parts

    ix = RamStorage().create_index(schema())
    recorder = searchindex._fill(ix, catalog)
    with ix.reader() as reader:
        stored = {
            docnum: {**fields, "parts": name_parts(fields["name"])}
            for docnum, fields in reader.iter_docs()
        }
    return recorder.scores(), stored


def test_the_build_scores_every_term_as_whoosh_writer_does() -> None:
    catalog = open_catalog()
    scores, stored = _whoosh_built(catalog)
    recorder, analysed = searchindex._analysed(catalog)
    ours = recorder.scores()
    assert len(ours) > 1000
    assert sorted(ours) == sorted(scores)  # the same terms
    for term, row in scores.items():
        assert ours[term] == row, term  # the same documents, the same floats
    assert analysed == stored
    assert [list(doc) for doc in analysed.values()] == [list(doc) for doc in stored.values()]


def test_an_index_on_disk_holds_only_what_queries_read(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setenv("KB_CACHE_DIR", str(tmp_path / "cache"))
    catalog = open_catalog()
    ix = searchindex.open_index(catalog, rebuild=True)
    files = searchindex._index_files(searchindex.index_dir(catalog))
    assert files == {searchindex.DOCS, searchindex.TERMS}
    assert ix.doc_count() == len(catalog.names())
    stored = searchindex._analysed(catalog)[1]
    assert ix.kb_stored == {k: json.loads(json.dumps(v)) for k, v in stored.items()}


def test_whoosh_over_the_same_records_ranks_every_query_as_the_table_does() -> None:
    """The ``--format json`` answer, scores included, of every tuned query: read from the
    whoosh-free term table, and from a whoosh searcher of the index (built in memory on
    first use, :class:`kb.index.searchindex.DiskIndex`)."""
    import yaml

    from kb.api.search import search
    from kb.index.fulltext import Session

    root = Path(__file__).resolve().parent
    queries = [q["q"] for q in yaml.safe_load((root / "data" / "search_queries.yaml").read_text())]
    catalog = open_catalog()
    session = Session(searchindex.open_index(catalog))
    try:
        for query in queries:
            assert search(catalog, query, limit=20, session=session) == search(
                catalog, query, limit=20
            ), query
    finally:
        session.close()


def test_an_index_in_memory_spills_to_a_folder_of_its_own(tmp_path: Path, monkeypatch: Any) -> None:
    """whoosh's writer names its scratch folder after the index (``MAIN.tmp`` in the
    system temp dir) and deletes it when done, so two processes building at once lost
    each other's files (seen under pytest-xdist).  Something else sitting at that name
    must not matter: each build spills to a folder of its own."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / "MAIN.tmp").write_text("another process's scratch\n")
    ix = searchindex._in_memory(open_catalog())
    assert ix.doc_count() == open_catalog().count()
    assert (tmp_path / "MAIN.tmp").read_text() == "another process's scratch\n"
    assert [p.name for p in tmp_path.iterdir()] == ["MAIN.tmp"]  # its own folder is gone
