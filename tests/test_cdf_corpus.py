"""Every change-data-feed expectation of the conformance corpus, read through SQL ``table_changes()``.

``expected/<name>/cdf_<start>_<end>.parquet`` must equal ``SELECT * FROM table_changes('<path>',
start, end)`` (``_commit_timestamp`` is compared only where the manifest entry says it is included);
the ``cdf`` ``expect_error`` entries must fail with the matching error class, whose name and
message reach the user in the text of the exception DataFusion raises.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from conftest import CORPUS, corpus_table, manifest_tables, require_corpus
from corpus_compare import assert_same_rows

ERROR_CLASSES = {
    "cdf_not_enabled": "CdfNotEnabledError",
    "cdf_invalid_range": "InvalidRangeError",
    "cdf_version_not_found": "VersionNotFoundError",
}


def _cdf_expectations() -> list:
    out = []
    for t in manifest_tables():
        for e in t.get("expected", []):
            if e["kind"] == "cdf":
                ident = f"{t['name']}-{e['start_version']}-{e['end_version']}"
                out.append(pytest.param(t, e, id=ident))
    return out


def _cdf_errors() -> list:
    out = []
    for t in manifest_tables():
        for e in t.get("expect_error") or []:
            if e.get("operation") == "cdf":
                ident = f"{t['name']}-{e['start_version']}-{e['end_version']}-{e['kind']}"
                out.append(pytest.param(t, e, id=ident))
    return out


def _sql_literal(path: str) -> str:
    return "'" + path.replace("'", "''") + "'"


@pytest.fixture
def ctx():
    from datafusion import SessionContext

    import delta_datafusion as dd

    c = SessionContext()
    dd.register(c)
    return c


def test_corpus_has_cdf_expectations():
    require_corpus()
    assert len(_cdf_expectations()) >= 20
    assert {e.values[1]["kind"] for e in _cdf_errors()} == set(ERROR_CLASSES)


@pytest.mark.parametrize("entry,expectation", _cdf_expectations())
def test_corpus_cdf_sql(ctx, entry, expectation):
    path = corpus_table(entry["name"])
    start = expectation["start_version"]
    end = expectation["end_version_requested"]
    args = f"{_sql_literal(str(path))}, {start}" + ("" if end is None else f", {end}")
    got = ctx.sql(f"SELECT * FROM table_changes({args})").to_arrow_table()
    expected = pq.read_table(CORPUS / expectation["file"])
    assert got.schema.names[-3:] == ["_change_type", "_commit_version", "_commit_timestamp"]
    if "_commit_timestamp" not in expected.column_names:
        got = got.drop_columns(["_commit_timestamp"])
    else:
        assert str(expectation["commit_timestamp"]).startswith("included")
    assert_same_rows(got, expected, f"{entry['name']} cdf {start}..{expectation['end_version']}")
    count = ctx.sql(f"SELECT count(*) AS n FROM table_changes({args})").to_pydict()["n"][0]
    assert count == expected.num_rows, f"{entry['name']} cdf count(*)"
    # The data columns come in table-schema order, before the change columns.
    assert got.schema.names[: len(expected.column_names) - 2] == expected.column_names[:-2]


@pytest.mark.parametrize("entry,expectation", _cdf_expectations())
def test_corpus_cdf_python_api(entry, expectation):
    from delta_datafusion import DeltaTable

    path = corpus_table(entry["name"])
    scan = DeltaTable(str(path)).changes(expectation["start_version"], expectation["end_version_requested"])
    assert scan.end_version == expectation["end_version"]
    got = scan.to_table()
    expected = pq.read_table(CORPUS / expectation["file"])
    if "_commit_timestamp" not in expected.column_names:
        got = got.drop_columns(["_commit_timestamp"])
    assert_same_rows(got, expected, f"{entry['name']} (python api)")


@pytest.mark.parametrize("entry,expectation", _cdf_errors())
def test_corpus_cdf_errors_sql(ctx, entry, expectation):
    path = corpus_table(entry["name"])
    start, end = expectation["start_version"], expectation["end_version"]
    args = f"{_sql_literal(str(path))}, {start}" + ("" if end is None else f", {end}")
    cls = ERROR_CLASSES[expectation["kind"]]
    with pytest.raises(Exception) as info:
        ctx.sql(f"SELECT * FROM table_changes({args})").to_arrow_table()
    text = str(info.value)
    assert cls in text, text[:500]
    if expectation["kind"] == "cdf_not_enabled":
        assert "version 0" in text and "delta.enableChangeDataFeed" in text
    elif expectation["kind"] == "cdf_invalid_range":
        assert f"start version {start} is after end version {end}" in text
    else:
        assert f"start version {start} is after the latest version" in text


@pytest.mark.parametrize("entry,expectation", _cdf_errors())
def test_corpus_cdf_errors_python_api(entry, expectation):
    from delta_datafusion import DeltaTable, errors

    path = corpus_table(entry["name"])
    cls = getattr(errors, ERROR_CLASSES[expectation["kind"]])
    with pytest.raises(cls):
        DeltaTable(str(path)).changes(expectation["start_version"], expectation["end_version"]).to_table()
