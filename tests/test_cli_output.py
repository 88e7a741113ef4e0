"""The CLI's machine-readable output: ``--format csv|json`` on ``sql``, ``history``, ``files`` and
``changes``, written by DataFusion's own writers, every row streamed unless --max-rows says."""

from __future__ import annotations

import csv
import io
import json

import pyarrow as pa
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


def test_columns_named_alike(capsys):
    """A result may name two columns alike (a self-join's ``a.value`` and ``b.value``; a column
    ``"s.a"`` beside a struct ``s`` once CSV flattens it), and the table format prints them.
    DataFusion's writers refused them with "Schema contains duplicate qualified field name
    rows.value" (``rows``: a name the user never wrote), and only when there were rows: an empty
    result wrote its header. CSV now writes them, one header name per column; JSON, whose objects
    cannot hold a key twice, refuses them naming the column, rows or none."""
    join = "SELECT a.value, b.value FROM generate_series(1, 2) a JOIN generate_series(1, 2) b ON a.value = b.value"
    assert _run(capsys, "sql", join + " ORDER BY 1", "--format", "csv").splitlines() == [
        "value,value",
        "1,1",
        "2,2",
    ]
    flat = "SELECT 1 AS \"s.a\", named_struct('a', 2, 'b', ',') AS s"
    assert list(csv.reader(io.StringIO(_run(capsys, "sql", flat, "--format", "csv")))) == [
        ["s.a", "s.a", "s.b"],
        ["1", "2", ","],
    ]
    for query in (join, join + " WHERE false"):
        assert cli.main(["sql", query, "--format", "json"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ArgumentError: --format json: 2 columns are named 'value'"), err


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


def _shown_by_datafusion(values: pa.Array) -> list[str | None]:
    """DataFusion's text of each value (its cast to text, which is what its ``show()`` prints)."""
    from datafusion import SessionContext, col
    from datafusion import functions as f

    df = SessionContext().from_arrow(pa.table({"x": values}))
    return df.select(f.arrow_cast(col("x"), "Utf8").alias("x")).to_arrow_table().column("x").to_pylist()


def _shown_by_the_table(values: pa.Array) -> list[str]:
    lines = cli._format(pa.table({"x": values}), max_rows=len(values)).splitlines()
    return [line.rstrip() for line in lines[2:-1]]


def test_the_table_shows_times_as_datafusion_and_the_other_formats_do(capsys):
    """The table format wrote timestamps as Python does (``2024-01-01 11:20:00+00:00``, every
    digit of the unit) while --format csv/json and DataFusion's own show() write RFC 3339
    (``2024-01-01T11:20:00Z``, the fraction in 3, 6 or 9 digits as needed): the table now writes
    what DataFusion writes, for every unit, zone (named zones' summer time as DataFusion's rules
    have it, which end in 2099) and year, times of day too, and inside structs and lists."""
    import random

    query = "SELECT trip_id, started_at FROM t ORDER BY trip_id"
    table = _run(capsys, "sql", query, "--table", f"t={TRIPS}", "--max-rows", "5").splitlines()
    rows = _run(capsys, "sql", query, "--table", f"t={TRIPS}", "--max-rows", "5", "--format", "json")
    assert [line.split(" | ")[1].rstrip() for line in table[2:-2]] == [
        json.loads(line)["started_at"] for line in rows.splitlines()
    ]
    assert table[2].endswith("Z")  # the premise: a UTC time

    rng = random.Random(29)
    scales = {"s": 1, "ms": 1_000, "us": 1_000_000, "ns": 1_000_000_000}
    zones = [
        None,
        "UTC",
        "+00:00",
        "+05:30",
        "-03:00",
        "Europe/London",
        "America/New_York",
        "Australia/Lord_Howe",
    ]
    for unit, scale in scales.items():
        span = min(250_000_000_000 * scale, 2**63 - 1)  # about 7,900 years either side of 1970
        values = [rng.randint(-span, span) for _ in range(60)]
        values += [rng.randint(-3_000_000_000, 3_000_000_000) * scale // 1000 * 1000 for _ in range(40)]
        values += [0, -1, 1, None]
        for tz in zones:
            array = pa.array(values, pa.timestamp(unit, tz))
            want = [v if v is not None else "NULL" for v in _shown_by_datafusion(array)]
            assert _shown_by_the_table(array) == want, (unit, tz)
    for kind, day in (
        (pa.time32("s"), 86_400),
        (pa.time32("ms"), 86_400_000),
        (pa.time64("ns"), 86_400 * 10**9),
    ):
        array = pa.array([rng.randrange(day) for _ in range(50)] + [0, day - 1, day // 2], kind)
        assert _shown_by_the_table(array) == _shown_by_datafusion(array), kind

    nested = pa.table(
        {
            "st": pa.array(
                [{"t": 1704108000500000, "n": -62135596800000000}],
                pa.struct([("t", pa.timestamp("us", "UTC")), ("n", pa.timestamp("us"))]),
            ),
            "l": pa.array([[4_000_000_400]], pa.list_(pa.time64("us"))),
        }
    )
    assert cli._format(nested).splitlines()[2].split(" | ") == [
        "{t: 2024-01-01T11:20:00.500Z, n: 0001-01-01T00:00:00}",  # as DataFusion's show() prints them
        "[01:06:40.000400]",
    ]
