"""The CLI's machine-readable output: ``--format csv|json`` on ``sql``, ``history``, ``files`` and
``changes``, written by DataFusion's own writers, every row streamed unless --max-rows says."""

from __future__ import annotations

import csv
import io
import json

import pytest

from delta_datafusion import DeltaTable, cli, cli_output

TRIPS = str(cli.example_table())


def _run(capsys, *argv: str) -> str:
    assert cli.main(list(argv)) == 0
    return capsys.readouterr().out


def test_sql_csv_and_json_write_every_row_as_datafusion_does(capsys):
    """All 130 rows (the table format prints 50 unless told), a header line for CSV, one object
    a line for JSON; the values are the query's."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    query = "SELECT * FROM trips ORDER BY trip_id"
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "trips", TRIPS)
    expected = ctx.sql(query).to_pylist()
    assert len(expected) == 130
    rows = list(
        csv.DictReader(
            io.StringIO(_run(capsys, "sql", query, "--table", f"trips={TRIPS}", "--format", "csv"))
        )
    )
    assert [int(r["trip_id"]) for r in rows] == [e["trip_id"] for e in expected]
    assert [r["city"] for r in rows] == [e["city"] for e in expected]
    assert [float(r["fare"]) for r in rows] == [e["fare"] for e in expected]
    lines = _run(capsys, "sql", query, "--table", f"trips={TRIPS}", "--format", "json").splitlines()
    got = [json.loads(line) for line in lines]
    assert [g["trip_id"] for g in got] == [e["trip_id"] for e in expected]
    assert got[0]["started_at"] == expected[0]["started_at"].strftime("%Y-%m-%dT%H:%M:%SZ")
    three = _run(capsys, "sql", query, "--table", f"trips={TRIPS}", "--format", "csv", "--max-rows", "3")
    assert three.splitlines()[0] == "trip_id,city,rider,distance_km,fare,started_at"
    assert len(three.splitlines()) == 4


def test_values_are_written_exactly(capsys):
    """Decimals keep their digits and scale, timestamps their microseconds, NULL is an empty CSV
    field and an absent JSON key, text with commas, quotes and line breaks is quoted."""
    query = (
        "SELECT CAST('12345678901234567.89' AS DECIMAL(20, 2)) AS d, "
        "TIMESTAMP '2024-01-02 03:04:05.123456' AS ts, CAST(NULL AS INT) AS n, "
        "'a,\"b\"' || chr(10) || 'c' AS s, 0.1 AS f"
    )
    text = _run(capsys, "sql", query, "--format", "json")
    assert (
        text == '{"d":12345678901234567.89,"ts":"2024-01-02T03:04:05.123456","s":"a,\\"b\\"\\nc","f":0.1}\n'
    )
    text = _run(capsys, "sql", query, "--format", "csv")
    assert list(csv.reader(io.StringIO(text))) == [
        ["d", "ts", "n", "s", "f"],
        ["12345678901234567.89", "2024-01-02T03:04:05.123456", "", 'a,"b"\nc', "0.1"],
    ]


def test_rows_stream_in_chunks_with_one_header(capsys, monkeypatch):
    """Rows go through DataFusion's writer a chunk at a time: the header comes once, the rows in
    order; an empty result still has its header line (JSON: nothing)."""
    monkeypatch.setattr(cli_output, "CHUNK_ROWS", 7)
    text = _run(capsys, "sql", "SELECT value AS v FROM generate_series(1, 100)", "--format", "csv")
    assert text.splitlines() == ["v"] + [str(v) for v in range(1, 101)]
    assert _run(capsys, "sql", "SELECT 1 AS a, 'x' AS b WHERE false", "--format", "csv") == "a,b\n"
    assert _run(capsys, "sql", "SELECT 1 AS a WHERE false", "--format", "json") == ""


def test_csv_refuses_nested_columns_and_flattens_structs(capsys):
    assert cli.main(["sql", "SELECT [1, 2] AS l", "--format", "csv"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ArgumentError: --format csv: column 'l' is a list") and err.count("\n") == 1
    text = _run(capsys, "sql", "SELECT named_struct('a', 1, 'b', 'x') AS st", "--format", "csv")
    assert text.splitlines() == ["st.a,st.b", "1,x"]
    assert _run(capsys, "sql", "SELECT [1, 2] AS l", "--format", "json") == '{"l":[1,2]}\n'


def test_history_files_and_changes_as_json_and_csv(capsys):
    """The inspection commands write the rows they print as a table, all of them, without
    their summary lines."""
    table = DeltaTable(TRIPS)
    history = [json.loads(line) for line in _run(capsys, "history", TRIPS, "--format", "json").splitlines()]
    assert [h["version"] for h in history] == list(range(table.snapshot().version, -1, -1))
    assert history[-1]["operation"] == table.history().column("operation")[0].as_py()
    # commitInfo's maps as objects (JSON lines) or as JSON text (CSV), not the table's k=v text,
    # with text values as Spark's DESCRIBE HISTORY types them (deltalake writes numbers)
    infos = [json.loads(t) for t in table.history().column("commit_info").to_pylist()][::-1]

    def texts(m: dict | None) -> dict | None:
        return None if m is None else {k: v if isinstance(v, str) else json.dumps(v) for k, v in m.items()}

    for h, info in zip(history, infos, strict=True):
        assert h.get("parameters") == texts(info.get("operationParameters"))
        assert h.get("metrics") == texts(info.get("operationMetrics"))
    assert any(h.get("parameters") for h in history) and any(h.get("metrics") for h in history)
    rows = list(csv.DictReader(io.StringIO(_run(capsys, "history", TRIPS, "--format", "csv"))))
    assert [json.loads(r["metrics"]) if r["metrics"] else None for r in rows] == [
        texts(i.get("operationMetrics")) for i in infos
    ]
    files = list(csv.DictReader(io.StringIO(_run(capsys, "files", TRIPS, "--format", "csv"))))
    live = table.snapshot().files()
    assert sorted(f["path"] for f in files) == sorted(live.column("path").to_pylist())
    assert [f["path"] for f in files] == sorted(f["path"] for f in files)
    assert {f["partition_values.city"] for f in files} == {"Faro", "Lisbon", "Porto"}
    assert sum(int(f["num_records"]) for f in files) == 130
    kept = _run(capsys, "files", TRIPS, "--where", "city = 'Porto'", "--format", "json").splitlines()
    assert [json.loads(line)["partition_values"] for line in kept] == [{"city": "Porto"}]
    feed = table.changes(0).to_table()
    assert feed.num_rows > 50  # more than the table format prints
    lines = _run(capsys, "changes", TRIPS, "0", "--format", "json").splitlines()
    assert len(lines) == feed.num_rows
    got = sorted((r["_commit_version"], r["_change_type"], r["trip_id"]) for r in map(json.loads, lines))
    want = sorted(
        zip(
            feed.column("_commit_version").to_pylist(),
            feed.column("_change_type").to_pylist(),
            feed.column("trip_id").to_pylist(),
            strict=True,
        )
    )
    assert got == want


@pytest.mark.parametrize(
    "command", [["sql", "SELECT 1"], ["history", TRIPS], ["files", TRIPS], ["changes", TRIPS, "3"]]
)
def test_format_is_checked(capsys, command):
    with pytest.raises(SystemExit) as e:
        cli.main([*command, "--format", "xml"])
    assert e.value.code == 2
    assert "invalid choice: 'xml'" in capsys.readouterr().err
