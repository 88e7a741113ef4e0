"""A small sqllogictest-style runner for the SQL scripts in ``sql/``.

Format (a subset of sqllogictest):

    statement ok            the next SQL (up to a blank line) must succeed
    statement error <text>  ... must fail with <text> in the message
    query [rowsort]         the SQL up to ``----`` is run; the following lines (up to a blank
                            line) are the expected rows, values separated by `` | ``; NULL is
                            null; ``rowsort`` compares rows sorted

``${EXAMPLE}`` is the bundled example table, ``${CORPUS}`` the conformance corpus folder.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Record:
    kind: str  # statement / query
    sql: str
    line: int
    expect_error: str | None = None
    rowsort: bool = False
    expected: list[str] | None = None


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        start = i + 1
        head = line.split(None, 2)
        i += 1
        body: list[str] = []
        while i < len(lines) and lines[i].strip() and lines[i].strip() != "----":
            body.append(lines[i])
            i += 1
        sql = "\n".join(body)
        if head[0] == "statement":
            err = head[2] if len(head) > 2 and head[1] == "error" else ("" if head[1] == "error" else None)
            records.append(Record("statement", sql, start, expect_error=err))
            continue
        if head[0] != "query":
            raise ValueError(f"line {start}: unknown record {line!r}")
        expected: list[str] = []
        if i < len(lines) and lines[i].strip() == "----":
            i += 1
            while i < len(lines) and lines[i].strip():
                expected.append(lines[i].strip())
                i += 1
        records.append(Record("query", sql, start, rowsort="rowsort" in head[1:], expected=expected))
    return records


def _fmt(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        if math.isnan(v):
            return "NaN"
        return repr(round(v, 6))
    return str(v)


def run(ctx, path: Path, substitutions: dict[str, str]) -> int:
    """Run one script; raise AssertionError naming the file and line on the first mismatch."""
    text = path.read_text()
    for k, v in substitutions.items():
        text = text.replace("${" + k + "}", v)
    count = 0
    for rec in parse(text):
        where = f"{path.name}:{rec.line}"
        if rec.kind == "statement":
            if rec.expect_error is None:
                ctx.sql(rec.sql).collect()
            else:
                try:
                    ctx.sql(rec.sql).collect()
                except Exception as e:  # DataFusion errors carry our error text
                    assert re.search(re.escape(rec.expect_error), str(e)), (
                        f"{where}: error {e} lacks {rec.expect_error!r}"
                    )
                else:
                    raise AssertionError(f"{where}: statement succeeded but an error was expected")
        else:
            table = ctx.sql(rec.sql).to_arrow_table()
            rows = [" | ".join(_fmt(v) for v in r.values()) for r in table.to_pylist()]
            expected = list(rec.expected or [])
            if rec.rowsort:
                rows, expected = sorted(rows), sorted(expected)
            assert rows == expected, (
                f"{where}: query\n{rec.sql}\nreturned\n"
                + "\n".join(rows)
                + "\nexpected\n"
                + "\n".join(expected)
            )
        count += 1
    return count
