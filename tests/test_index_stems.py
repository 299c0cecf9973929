"""The index keeps the stems its build gave, so a query's known words are stemmed without
importing the stemmer; each stored stem is what the stemmer gives."""

from __future__ import annotations

import subprocess
import sys

from kb.catalog.compiled import open_catalog
from kb.index import textanalysis
from kb.index.searchindex import open_index, open_terms


def test_every_stored_stem_is_the_stemmers() -> None:
    catalog = open_catalog()
    open_index(catalog)
    table = open_terms(catalog)
    assert table is not None
    try:
        rows = table._con.execute("SELECT word, stem FROM stems").fetchall()
    finally:
        table.close()
    assert len(rows) > 1000  # the records' words, not a handful
    from whoosh.lang.porter import stem as porter

    for word, stored in rows[:: max(1, len(rows) // 500)]:
        want = str(porter(word))
        assert stored == textanalysis._FOLD_STEMS.get(want, want), word


def test_a_query_word_the_index_holds_is_stemmed_without_the_stemmer() -> None:
    probe = (
        "import sys\n"
        "from kb.catalog.compiled import open_catalog\n"
        "from kb.index.search import search\n"
        "search(open_catalog(), 'quantized grouped matmul experts', limit=3)\n"
        "print('whoosh.lang.porter' in sys.modules)\n"
    )
    open_index(open_catalog())  # built and verified before the probe
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_an_unknown_word_still_gets_the_stemmers_stem() -> None:
    textanalysis.known_stems({"zzqualifications": "wrong"})  # a table never lies; here it would
    textanalysis.stem.cache_clear()
    try:
        assert textanalysis.stem("qualifications") == "qualif"
    finally:
        textanalysis._KNOWN.pop("zzqualifications", None)
        textanalysis.stem.cache_clear()
