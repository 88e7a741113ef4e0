"""Tests of delta_datafusion.skipping: hand-built files tables for each pruning rule, and a
hypothesis property test that no file holding a matching row is ever dropped."""

from __future__ import annotations

import datetime as dt
import decimal
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from conftest import predicate_trees
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from delta_datafusion import predicate as P
from delta_datafusion.predicate import (
    BoolLiteral,
    Comparison,
    In,
    IsNotNull,
    IsNull,
    Literal,
    Not,
    col,
    lit,
    to_pyarrow,
)
from delta_datafusion.skipping import (
    STRING_MAX_TRUSTED_BYTES,
    file_all_match_mask,
    file_keep_mask,
    partition_keep_mask,
)

NAN = float("nan")
UTC = dt.timezone.utc
TS = pa.timestamp("us", tz="UTC")
TSN = pa.timestamp("us")

DATA_FIELDS = [
    ("i", pa.int64()),
    ("f", pa.float64()),
    ("s", pa.string()),
    ("ts", TS),
    ("tsn", TSN),
    ("d", pa.date32()),
    ("dec", pa.decimal128(10, 2)),
    ("b", pa.bool_()),
    ("bin", pa.binary()),
    ("st", pa.struct([("x", pa.int32()), ("y", pa.string())])),
]
PART_FIELDS = [("p", pa.string()), ("q", pa.int32())]
SCHEMA = pa.schema(DATA_FIELDS + PART_FIELDS)
PARTS = ["p", "q"]


def _null_count_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([(f.name, _null_count_type(f.type)) for f in t])
    return pa.int64()


MM_TYPE = pa.struct(DATA_FIELDS)
NC_TYPE = _null_count_type(MM_TYPE)
STATS_TYPE = pa.struct(
    [
        ("numRecords", pa.int64()),
        ("minValues", MM_TYPE),
        ("maxValues", MM_TYPE),
        ("nullCount", NC_TYPE),
        ("tightBounds", pa.bool_()),
    ]
)
PV_TYPE = pa.struct(PART_FIELDS)


def files(entries: list[dict], stats_type: pa.DataType = STATS_TYPE) -> pa.Table:
    """A files table: each entry has optional partition values ``p``/``q`` and ``stats``."""
    pv = pa.array([{"p": e.get("p"), "q": e.get("q")} for e in entries], PV_TYPE)
    stats = pa.array([e.get("stats") for e in entries], stats_type)
    return pa.table({"path": [f"f{i}" for i in range(len(entries))], "partition_values": pv, "stats": stats})


def stats(n=10, mn=None, mx=None, nc=None, tight=None):
    out = {"numRecords": n, "minValues": mn, "maxValues": mx, "nullCount": nc}
    if tight is not None:
        out["tightBounds"] = tight
    return out


def keep(pred, entries, **kw) -> list[bool]:
    mask = file_keep_mask(pred, files(entries, **kw), SCHEMA, PARTS)
    assert isinstance(mask, pa.BooleanArray) and mask.null_count == 0
    return mask.to_pylist()


i, f, s, ts, tsn, d = (col(n, t) for n, t in DATA_FIELDS[:6])
p, q = col("p"), col("q")


def int_file(lo, hi, nulls=0, n=10, **kw):
    return {"stats": stats(n, {"i": lo}, {"i": hi}, {"i": nulls}, **kw)}


# ---- min/max comparisons -----------------------------------------------------------------------

THREE = [int_file(0, 10), int_file(20, 30), int_file(5, 5)]


@pytest.mark.parametrize(
    "pred, expected",
    [
        (P.eq(i, 5), [True, False, True]),
        (P.eq(i, 15), [False, False, False]),
        (P.eq(i, 20), [False, True, False]),
        (P.lt(i, 5), [True, False, False]),
        (P.le(i, 5), [True, False, True]),
        (P.gt(i, 10), [False, True, False]),
        (P.ge(i, 10), [True, True, False]),
        (P.gt(lit(10), i), [True, False, True]),  # literal on the left
        (P.ne(i, 5), [True, True, False]),  # min == max == 5 and no nulls
        (P.between(i, 11, 19), [False, False, False]),
        (P.is_in(i, [15, 16, 40]), [False, False, False]),
        (P.is_in(i, [15, 25]), [False, True, False]),
        (P.is_in(i, [-1, 5]), [True, False, True]),
        (P.not_in(i, [5, 6]), [True, True, False]),
        (P.not_in(i, [4, 6]), [True, True, True]),
        (P.or_(P.lt(i, 0), P.gt(i, 29)), [False, True, False]),
        (P.and_(P.gt(i, 3), P.lt(i, 7)), [True, False, True]),
        (P.TRUE, [True, True, True]),
        (P.FALSE, [False, False, False]),
        (P.NULL, [False, False, False]),
    ],
    ids=str,
)
def test_min_max(pred, expected):
    assert keep(pred, THREE) == expected


def test_pruning_drops_files():
    """Pruning is not useless: most files go for a selective predicate."""
    entries = [int_file(10 * k, 10 * k + 9) for k in range(100)]
    mask = keep(P.between(i, 205, 214), entries)
    assert [k for k, m in enumerate(mask) if m] == [20, 21]


def test_not_is_pushed_down():
    assert keep(Not(P.gt(i, 10)), THREE) == [True, False, True]
    assert keep(Not(P.is_in(i, [5])), THREE) == [True, True, False]
    assert keep(Not(P.not_in(i, [15, 25])), THREE) == [False, True, False]
    assert keep(Not(P.or_(P.lt(i, 20), P.gt(i, 25))), THREE) == [False, True, False]
    assert keep(Not(P.and_(P.ge(i, 0), P.le(i, 10))), THREE) == [False, True, False]
    assert keep(Not(Not(P.eq(i, 25))), THREE) == [False, True, False]
    assert keep(Not(P.is_not_null(i)), THREE) == [False, False, False]  # nullCount 0
    assert keep(Not(P.NULL), THREE) == [False, False, False]
    assert keep(Not(P.FALSE), THREE) == [True, True, True]


# ---- nulls -------------------------------------------------------------------------------------


def test_null_counts():
    entries = [
        int_file(0, 10, nulls=0),
        int_file(0, 10, nulls=3),
        {"stats": stats(10, {"i": None}, {"i": None}, {"i": 10})},  # all null
        {"stats": stats(10, {"i": 0}, {"i": 10}, None)},  # nullCount unknown
        {"stats": stats(0, {"i": None}, {"i": None}, {"i": 0})},  # empty file
    ]
    assert keep(P.is_null(i), entries) == [False, True, True, True, False]
    assert keep(P.is_not_null(i), entries) == [True, True, False, True, False]
    assert keep(P.gt(i, 5), entries) == [True, True, False, True, False]
    assert keep(P.ne(i, 5), entries) == [True, True, False, True, False]
    assert keep(P.is_in(i, [5]), entries) == [True, True, False, True, False]
    assert keep(P.not_in(i, [5]), entries) == [True, True, False, True, False]
    # a comparison with NULL is never TRUE; NOT IN a list with NULL is never TRUE
    assert keep(P.eq(i, lit(None, pa.int64())), entries) == [False] * 5
    assert keep(P.not_in(i, [1, None]), entries) == [False] * 5
    assert keep(P.is_in(i, [None]), entries) == [False] * 5
    assert keep(P.is_in(i, [5, None]), entries) == [True, True, False, True, False]


def test_not_equal_needs_no_nulls():
    same = [
        int_file(5, 5, nulls=0),
        int_file(5, 5, nulls=2),
        {"stats": stats(10, {"i": 5}, {"i": 5}, None)},
    ]
    assert keep(P.ne(i, 5), same) == [False, True, True]
    assert keep(P.not_in(i, [4, 5]), same) == [False, True, True]
    assert keep(P.ne(i, 6), same) == [True, True, True]


def test_missing_stats_keep_files():
    entries = [
        {"stats": None},
        {"stats": {"numRecords": 10}},
        {"stats": stats(10, None, None, None)},
        {"stats": stats(10, {"i": None}, {"i": None}, {"i": None})},
        {"stats": stats(None, {"i": 100}, {"i": 200}, {"i": 3})},  # numRecords unknown
        {},
    ]
    for pred in [P.eq(i, 5), P.lt(i, 5), P.is_null(i), P.is_not_null(i), P.not_in(i, [5]), P.ne(i, 5)]:
        expected = [True] * 6
        if pred == P.eq(i, 5) or pred == P.lt(i, 5):
            expected[4] = False  # min/max still usable without numRecords
        assert keep(pred, entries) == expected, str(pred)


def test_absent_fields_keep_files():
    mm = pa.struct([("f", pa.float64())])  # no "i" leaf at all
    partial = pa.struct([("numRecords", pa.int64()), ("minValues", mm)])  # no maxValues/nullCount
    t = files([{"stats": {"numRecords": 3, "minValues": {"f": 1.0}}}], stats_type=partial)
    for pred in [P.eq(i, 5), P.is_null(i), P.gt(col("f"), 9.0), P.lt(col("f"), 0.0), P.is_null(col("f"))]:
        expected = [pred != P.lt(col("f"), 0.0)]
        assert file_keep_mask(pred, t, SCHEMA, PARTS).to_pylist() == expected, str(pred)
    no_stats = pa.table({"path": ["a", "b"]})
    assert file_keep_mask(P.eq(i, 5), no_stats, SCHEMA, PARTS).to_pylist() == [True, True]
    assert file_keep_mask(P.eq(p, "x"), no_stats, SCHEMA, PARTS).to_pylist() == [True, True]
    assert file_keep_mask(P.FALSE, no_stats, SCHEMA, PARTS).to_pylist() == [False, False]


def test_unknown_columns_and_type_mismatch_keep_files():
    assert keep(P.eq(col("nope"), 5), THREE) == [True] * 3
    assert keep(P.eq(i, "five"), THREE) == [True, True, True]
    assert keep(P.lt(i, col("st")), THREE) == [True] * 3  # column vs column
    assert keep(P.is_null(col("nope")), THREE) == [True] * 3


def test_tight_bounds_false():
    """Wide bounds (deletion vectors): min/max are bounds; nullCount only in its two special cases."""
    entries = [
        int_file(0, 10, nulls=0, tight=False),
        int_file(0, 10, nulls=4, tight=False),  # carries no information
        {"stats": stats(10, {"i": None}, {"i": None}, {"i": 10}, tight=False)},  # all valid rows null
        int_file(5, 5, nulls=0, tight=False),
    ]
    assert keep(P.gt(i, 10), entries) == [False, False, False, False]
    assert keep(P.le(i, 10), entries) == [True, True, False, True]
    assert keep(P.is_null(i), entries) == [False, True, True, False]
    assert keep(P.is_not_null(i), entries) == [True, True, False, True]
    assert keep(P.ne(i, 5), entries) == [True, True, False, False]


# ---- type-specific rules -----------------------------------------------------------------------


def test_truncated_string_max():
    long_a = "a" * 32

    def one(mn, mx):
        return [{"stats": stats(5, {"s": mn}, {"s": mx}, {"s": 0})}]

    assert STRING_MAX_TRUSTED_BYTES == 28
    # Spark: 32-char prefix of the max + tie-breaker. Real values may be "aaa...ab", "aaa...az", ...
    spark = one("a", long_a + "\U0010ffff")
    assert keep(P.gt(s, long_a + "b"), spark) == [True]
    assert keep(P.eq(s, long_a + "z"), spark) == [True]
    # A writer that just truncates: the max "aaa...a" is below the real max "aaa...az".
    cut = one("a", long_a)
    assert keep(P.gt(s, long_a), cut) == [True]
    assert keep(P.eq(s, long_a + "z"), cut) == [True]
    assert keep(P.is_in(s, ["zz", long_a + "q"]), cut) == [True]
    # Truncation counted in UTF-16 units: 16 emoji + tie-breaker is only 17 code points.
    emoji = one("\U0001f600" * 16, "\U0001f600" * 16 + "\ufffd")
    assert keep(P.gt(s, "\U0001f600" * 17), emoji) == [True]
    assert keep(P.lt(s, "\U0001f600" * 16), emoji) == [False]  # the min prefix is a lower bound
    # Short maxima are exact and prune; 28 bytes and more are not trusted.
    assert keep(P.gt(s, "n"), one("a", "m")) == [False]
    assert keep(P.eq(s, "mm"), one("a", "m")) == [False]
    assert keep(P.gt(s, "é" * 13 + "a"), one("a", "é" * 13)) == [False]  # 26 bytes: trusted
    assert keep(P.gt(s, "é" * 14 + "a"), one("a", "é" * 14)) == [True]  # 28 bytes: not trusted
    # The min is a prefix, hence still a lower bound.
    prefix_min = one("b" * 32, "c")
    assert keep(P.lt(s, "b" * 32), prefix_min) == [False]
    assert keep(P.le(s, "b" * 32), prefix_min) == [True]
    assert keep(P.lt(s, "b" * 31), prefix_min) == [False]
    # != prunes only on an exact (short) max.
    assert keep(P.ne(s, long_a), one(long_a, long_a)) == [True]
    assert keep(P.ne(s, "ab"), one("ab", "ab")) == [False]


def _ts(ms: float, tz=True):
    v = dt.datetime(2024, 1, 1, 12, tzinfo=UTC if tz else None) + dt.timedelta(microseconds=round(ms * 1000))
    return v


def test_timestamps_truncated_to_milliseconds():
    # real values 12:00:00.000000 .. 12:00:00.000700; stats truncated to ms: both 12:00:00.000
    entries = [
        {"stats": stats(5, {"ts": _ts(0), "tsn": _ts(0, False)}, {"ts": _ts(0), "tsn": _ts(0, False)}, {})}
    ]
    for c, tz in ((ts, True), (tsn, False)):
        typ = TS if tz else TSN
        assert keep(P.gt(c, lit(_ts(0.5, tz), typ)), entries) == [True], str(c)
        assert keep(P.eq(c, lit(_ts(0.7, tz), typ)), entries) == [True]
        assert keep(P.ge(c, lit(_ts(0.999, tz), typ)), entries) == [True]
        assert keep(P.gt(c, lit(_ts(1.0, tz), typ)), entries) == [False]
        assert keep(P.ge(c, lit(_ts(2.0, tz), typ)), entries) == [False]
        assert keep(P.lt(c, lit(_ts(-1.5, tz), typ)), entries) == [False]
        assert keep(P.ne(c, lit(_ts(0, tz), typ)), entries) == [True]  # value unknown below 1 ms
    # a writer that truncated a pre-1970 min toward zero: real min -1.5 ms, stats min -1 ms
    epoch = dt.datetime(1970, 1, 1, tzinfo=UTC)
    pre = [{"stats": stats(5, {"ts": epoch - dt.timedelta(milliseconds=1)}, {"ts": epoch}, {"ts": 0})}]
    assert keep(P.lt(ts, lit(epoch - dt.timedelta(microseconds=1200), TS)), pre) == [True]
    assert keep(P.lt(ts, lit(epoch - dt.timedelta(microseconds=2100), TS)), pre) == [False]


def test_floats_and_nan():
    entries = [
        # rows e.g. [1.0, 5.0, NaN]: NaN is not reflected in min/max
        {"stats": stats(3, {"f": 1.0}, {"f": 5.0}, {"f": 0})},
        # all values equal 3.0 (plus maybe NaN)
        {"stats": stats(3, {"f": 3.0}, {"f": 3.0}, {"f": 0})},
        # NaN written into the stats (Spark-style max): unknown
        {"stats": stats(3, {"f": NAN}, {"f": NAN}, {"f": 0})},
        # all null
        {"stats": stats(3, {"f": None}, {"f": None}, {"f": 3})},
    ]
    f_ = col("f")
    assert keep(P.gt(f_, 10.0), entries) == [True, True, True, False]
    assert keep(P.ge(f_, 10.0), entries) == [True, True, True, False]
    assert keep(P.eq(f_, NAN), entries) == [True, True, True, False]
    assert keep(P.ge(f_, NAN), entries) == [True, True, True, False]
    assert keep(P.gt(f_, NAN), entries) == [False, False, False, False]
    assert keep(P.lt(f_, NAN), entries) == [True, True, True, False]
    assert keep(P.ne(f_, 3.0), entries) == [True, True, True, False]
    assert keep(P.not_in(f_, [3.0, 4.0]), entries) == [True, True, True, False]
    assert keep(P.is_in(f_, [NAN]), entries) == [True, True, True, False]
    assert keep(P.lt(f_, 0.0), entries) == [False, False, True, False]
    assert keep(P.le(f_, 1.0), entries) == [True, False, True, False]
    assert keep(P.eq(f_, 10.0), entries) == [False, False, True, False]
    assert keep(P.eq(f_, 4.0), entries) == [True, False, True, False]
    assert keep(P.is_in(f_, [10.0, -3.0]), entries) == [False, False, True, False]
    assert keep(Not(P.le(f_, 5.0)), entries) == [True, True, True, False]  # NOT (f <= 5) is f > 5
    assert keep(Not(P.eq(f_, NAN)), entries) == [True, True, True, False]
    assert keep(P.is_null(f_), entries) == [False, False, False, True]
    # NaN literal against an integer column: nothing is greater than NaN, everything is less
    assert keep(P.lt(i, NAN), THREE) == [True, True, True]
    assert keep(P.gt(i, NAN), THREE) == [False, False, False]


def test_other_types():
    entries = [
        {
            "stats": stats(
                4,
                {
                    "d": dt.date(2024, 1, 1),
                    "dec": decimal.Decimal("1.50"),
                    "b": False,
                    "bin": b"a",
                    "st": {"x": 1},
                },
                {
                    "d": dt.date(2024, 1, 31),
                    "dec": decimal.Decimal("9.99"),
                    "b": False,
                    "bin": b"b",
                    "st": {"x": 5},
                },
                {"d": 0, "dec": 0, "b": 0, "bin": 0, "st": {"x": 0, "y": 4}},
            )
        }
    ]
    assert keep(P.gt(col("d"), lit(dt.date(2024, 2, 1))), entries) == [False]
    assert keep(P.eq(col("d"), lit(dt.date(2024, 1, 15))), entries) == [True]
    assert keep(P.lt(col("dec"), lit(decimal.Decimal("1.25"), pa.decimal128(10, 2))), entries) == [False]
    assert keep(P.lt(col("dec"), lit(decimal.Decimal("1.5001"), pa.decimal128(10, 4))), entries) == [True]
    assert keep(P.eq(col("b"), True), entries) == [False]
    assert keep(P.eq(col("bin"), b"z"), entries) == [True]  # binary min/max are not used
    assert keep(P.gt(col(("st", "x")), 5), entries) == [False]
    assert keep(P.le(col(("st", "x")), 5), entries) == [True]
    assert keep(P.is_null(col(("st", "y"))), entries) == [True]  # all 4 null
    assert keep(P.is_not_null(col(("st", "y"))), entries) == [False]
    assert keep(P.is_null(col("st")), entries) == [True]  # no null count for a struct


# ---- partitions --------------------------------------------------------------------------------

PARTED = [
    {"p": "a", "q": 1, "stats": stats(5, {"i": 0}, {"i": 9}, {"i": 0})},
    {"p": "b", "q": 2, "stats": stats(5, {"i": 100}, {"i": 109}, {"i": 0})},
    {"p": None, "q": None, "stats": stats(5, {"i": 0}, {"i": 9}, {"i": 0})},
    {"p": "a", "q": 3, "stats": None},
]


@pytest.mark.parametrize(
    "pred, expected",
    [
        (P.eq(p, "a"), [True, False, False, True]),
        (P.ne(p, "a"), [False, True, False, False]),
        (Not(P.eq(p, "a")), [False, True, False, False]),
        (P.is_null(p), [False, False, True, False]),
        (P.is_not_null(p), [True, True, False, True]),
        (P.is_in(p, ["b", None]), [False, True, False, False]),
        (P.not_in(p, ["b"]), [True, False, False, True]),
        (P.not_in(p, ["b", None]), [False, False, False, False]),
        (P.gt(q, 1), [False, True, False, True]),
        (P.eq(p, lit(None, pa.string())), [False, False, False, False]),
        (P.or_(P.eq(p, "b"), P.lt(i, 5)), [True, True, True, True]),
        (P.and_(P.eq(p, "a"), P.gt(i, 50)), [False, False, False, True]),
        (P.or_(P.is_null(p), P.gt(i, 50)), [False, True, True, True]),
        (Not(P.or_(P.is_null(p), P.eq(q, 2))), [True, False, False, True]),
        (P.eq(p, q), [True, True, True, True]),  # string vs int32 cannot be evaluated: keep
        (P.eq(p, col("nope")), [True, True, True, True]),
    ],
    ids=str,
)
def test_partition_values(pred, expected):
    assert keep(pred, PARTED) == expected


def test_partition_keep_mask_and_null_struct():
    pv = pa.array([{"p": "a", "q": 1}, None, {"p": None, "q": 3}], PV_TYPE)
    assert partition_keep_mask(P.eq(p, "a"), pv).to_pylist() == [True, True, False]
    assert partition_keep_mask(P.and_(P.eq(q, 3), P.gt(i, 100)), pv).to_pylist() == [False, True, True]
    assert partition_keep_mask(P.eq(p, "a"), pa.chunked_array([pv[:1], pv[1:]])).to_pylist() == [
        True,
        True,
        False,
    ]
    assert partition_keep_mask(P.eq(p, "a"), pa.array([], PV_TYPE)).to_pylist() == []


def test_input_forms():
    t = files(PARTED)
    expected = [True, False, False, True]
    assert file_keep_mask(P.eq(p, "a"), t.to_batches()[0], SCHEMA, PARTS).to_pylist() == expected
    chunked = pa.concat_tables([t.slice(0, 1), t.slice(1, 2), t.slice(3)])
    assert chunked.column("stats").num_chunks == 3
    assert file_keep_mask(P.eq(p, "a"), chunked, SCHEMA, PARTS).to_pylist() == expected
    assert file_keep_mask(P.eq(p, "a"), t.slice(0, 0), SCHEMA, PARTS).to_pylist() == []


# ---- property test -----------------------------------------------------------------------------

H_DATA = [("i", pa.int64()), ("f", pa.float64()), ("s", pa.string()), ("ts", TS), ("d", pa.date32())]
H_SCHEMA = pa.schema(H_DATA + [("p", pa.string())])
H_MM = pa.struct(H_DATA)
H_STATS = pa.struct(
    [
        ("numRecords", pa.int64()),
        ("minValues", H_MM),
        ("maxValues", H_MM),
        ("nullCount", _null_count_type(H_MM)),
        ("tightBounds", pa.bool_()),
    ]
)
LONG = "a" * 32
H_POOLS = {
    "i": [-3, 0, 1, 2, 5, 7, 10, 12],
    "f": [-math.inf, -1.5, -0.0, 0.0, 0.5, 2.0, 7.25, math.inf, NAN],
    "s": [
        "",
        "a",
        "ab",
        "b",
        "zz",
        "é",
        "\U0001f600",
        LONG,
        LONG + "b",
        LONG + "é",
        "a" * 31,
        "\U0001f600" * 20,
    ],
    # microseconds around the epoch (pre-1970 included) so ms truncation matters
    "ts": [-4000, -1500, -999, -1, 0, 1, 500, 999, 1000, 1001, 2500, 4000],
    "d": [0, 1, 2, 5, 9],
}
H_LIT_TYPES = {"i": pa.int64(), "f": pa.float64(), "s": pa.string(), "ts": TS, "d": pa.date32()}


def _py(name: str, v):
    if v is None:
        return None
    if name == "ts":
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=v)
    if name == "d":
        return dt.date(1970, 1, 1) + dt.timedelta(days=v)
    return v


def _hlit(name: str, v) -> Literal:
    return Literal(pa.scalar(_py(name, v), H_LIT_TYPES[name]))


@st.composite
def _row(draw):
    out = {}
    for name in H_POOLS:
        if draw(st.integers(0, 4)) == 0:
            out[name] = None
        elif name == "s" and draw(st.booleans()):
            out[name] = draw(st.sampled_from(H_POOLS["s"])) + draw(
                st.text("abzé\U0001f600\U0010ffff", max_size=3)
            )
        elif name == "ts" and draw(st.booleans()):
            out[name] = draw(st.integers(-5000, 5000))
        else:
            out[name] = draw(st.sampled_from(H_POOLS[name]))
    return out


def _floor_ms(us: int) -> int:
    return (us // 1000) * 1000


def _trunc_ms(us: int) -> int:  # toward zero, as a careless writer might
    return int(us / 1000) * 1000


@st.composite
def _dense_row(draw):
    """A row without nulls (so a file's null counts are zero and its bounds decide)."""
    return {k: (v if v is not None else H_POOLS[k][1]) for k, v in draw(_row()).items()}


@st.composite
def _file(draw, row=None):
    rows = draw(st.lists(row if row is not None else _row(), min_size=0, max_size=6))
    part = draw(st.sampled_from(["a", "b", None]))
    tight = draw(st.sampled_from([True, True, False, None]))
    valid = list(range(len(rows)))
    if tight is False and rows:  # deletion vector: stats describe all rows, some are deleted
        deleted = draw(st.sets(st.integers(0, len(rows) - 1)))
        valid = [k for k in valid if k not in deleted]
    mode = draw(st.sampled_from(["full", "full", "full", "none", "partial"]))
    truncate_ts = draw(st.sampled_from([_floor_ms, _trunc_ms]))
    bump_max = draw(st.booleans())
    mn, mx, nc = {}, {}, {}
    for name in H_POOLS:
        vals = [r[name] for r in rows if r[name] is not None]
        nc[name] = len(rows) - len(vals)
        if name == "f":
            vals = [v for v in vals if not math.isnan(v)]
        if not vals:
            mn[name] = mx[name] = None
            continue
        lo, hi = min(vals), max(vals)
        if name == "ts":
            lo, hi = truncate_ts(lo), truncate_ts(hi)
        if name == "s":
            lo = lo[:32]
            if len(hi) > 32:
                hi = hi[:32] + "\U0010ffff" if bump_max else hi[:32]
        mn[name], mx[name] = _py(name, lo), _py(name, hi)
        if mode == "partial" and draw(st.booleans()):
            mn[name] = mx[name] = None
        if mode == "partial" and draw(st.booleans()):
            nc[name] = None
    stats_ = {"numRecords": len(rows), "minValues": mn, "maxValues": mx, "nullCount": nc}
    if tight is not None:
        stats_["tightBounds"] = tight
    if mode == "none":
        stats_ = None
    elif mode == "partial" and draw(st.booleans()):
        stats_["numRecords"] = None
    return {"rows": [rows[k] for k in valid], "p": part, "stats": stats_}


@st.composite
def _hleaf(draw):
    if draw(st.integers(0, 5)) == 0:
        c = col("p")
        kind = draw(st.sampled_from(["cmp", "null", "notnull", "in", "notin"]))
        values = [
            Literal(pa.scalar(v, pa.string()))
            for v in draw(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=3))
        ]
        if kind == "cmp":
            return Comparison(draw(st.sampled_from(P.COMPARISON_OPS)), c, values[0])
        return {
            "null": IsNull(c),
            "notnull": IsNotNull(c),
            "in": In(c, tuple(values)),
            "notin": In(c, tuple(values), True),
        }[kind]
    name = draw(st.sampled_from(sorted(H_POOLS)))
    c = col(name)
    kind = draw(st.sampled_from(["cmp", "cmp", "cmp", "cmp", "null", "notnull", "in", "notin", "const"]))
    if kind == "cmp":
        op = draw(st.sampled_from(P.COMPARISON_OPS))
        v = _hlit(name, draw(st.sampled_from(H_POOLS[name] + [None])))
        return Comparison(op, v, c) if draw(st.booleans()) else Comparison(op, c, v)
    if kind == "null":
        return IsNull(c)
    if kind == "notnull":
        return IsNotNull(c)
    if kind == "const":
        return BoolLiteral(draw(st.sampled_from([True, False, None])))
    values = [_hlit(name, v) for v in draw(st.lists(st.sampled_from(H_POOLS[name]), min_size=1, max_size=4))]
    if draw(st.integers(0, 4)) == 0:
        values.append(_hlit(name, None))
    return In(c, tuple(values), kind == "notin")


_HPRED = predicate_trees(_hleaf(), max_leaves=5)


def _files_table(fs: list[dict]) -> pa.Table:
    """The files table skipping reads (partition values, stats) for generated files."""
    return pa.table(
        {
            "partition_values": pa.array([{"p": x["p"]} for x in fs], pa.struct([("p", pa.string())])),
            "stats": pa.array([x["stats"] for x in fs], H_STATS),
        }
    )


def _rows_table(rows: list[dict], part) -> pa.Table:
    cols = {name: pa.array([_py(name, r[name]) for r in rows], typ) for name, typ in H_DATA}
    cols["p"] = pa.array([part] * len(rows), pa.string())
    return pa.table(cols, schema=H_SCHEMA)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fs=st.lists(_file(), min_size=1, max_size=5), pred=_HPRED)
def test_never_drops_a_file_with_a_matching_row(fs, pred):
    table = _files_table(fs)
    mask = file_keep_mask(pred, table, H_SCHEMA, ["p"]).to_pylist()
    row_filter = to_pyarrow(pred)
    for k, x in enumerate(fs):
        matches = _rows_table(x["rows"], x["p"]).filter(row_filter).num_rows
        if matches:
            assert mask[k], f"file {k} has {matches} matching rows but was dropped: {pred}\n{x}"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fs=st.lists(_file(), min_size=1, max_size=5), pred=st.one_of(_hleaf(), _HPRED))
def test_all_match_files_hold_only_matching_rows(fs, pred):
    """The dual property: a file judged all-matching (count(*) then comes from numRecords) has
    no live row for which the predicate is FALSE or NULL, whatever its stats quirks (wide bounds
    with deleted rows, truncated strings and timestamps, NaN, missing stats)."""
    _check_all_match(fs, pred)


def _check_all_match(fs: list[dict], pred) -> None:
    table = _files_table(fs)
    mask = file_all_match_mask(pred, table, H_SCHEMA, ["p"]).to_pylist()
    row_filter = to_pyarrow(pred)
    for k, x in enumerate(fs):
        if mask[k]:
            rows = _rows_table(x["rows"], x["p"])
            assert rows.filter(row_filter).num_rows == rows.num_rows, f"file {k}: {pred}\n{x}"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fs=st.lists(_file(_dense_row()), min_size=1, max_size=4), pred=_hleaf())
def test_all_match_single_leaves_on_files_without_nulls(fs, pred):
    """The same property where the bounds matter most: files without nulls, one leaf."""
    _check_all_match(fs, pred)


@st.composite
def _float_leaf(draw):
    """A comparison of the float column with a float or an integer literal, the column typed
    (as planning records it) or not."""
    op = draw(st.sampled_from(P.COMPARISON_OPS))
    if draw(st.booleans()):
        lit = Literal(pa.scalar(draw(st.sampled_from(H_POOLS["f"])), pa.float64()))
    else:
        lit = Literal(pa.scalar(draw(st.integers(-3, 8)), pa.int64()))
    c = col("f", pa.float64()) if draw(st.booleans()) else col("f")
    return Comparison(op, c, lit) if draw(st.booleans()) else Comparison(op, lit, c)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    fs=st.lists(_file(), min_size=1, max_size=5),
    pred=st.one_of(_float_leaf(), predicate_trees(_float_leaf(), max_leaves=4)),
)
def test_all_match_float_comparisons_agree_with_the_row_filter(fs, pred):
    """Float bounds prove '>', '>=' and '<>' for files whose unlisted rows may be NaN: the rows
    of every file judged all-matching pass the row filter (NaN above every number, -0.0 equal
    to 0.0), for float and integer literals and typed or untyped columns."""
    _check_all_match(fs, pred)


def _two_row_file(null_d: bool) -> dict:
    """A file of two rows with exact statistics (timestamps truncated to ms as writers do)."""
    rows = [
        {"i": 1, "f": 1.0, "s": "a", "ts": 0, "d": 0},
        {"i": 2, "f": 2.0, "s": "b", "ts": 1500, "d": None if null_d else 1},
    ]
    stats_ = {
        "numRecords": 2,
        "minValues": {"i": 1, "f": 1.0, "s": "a", "ts": _py("ts", 0), "d": _py("d", 0)},
        "maxValues": {"i": 2, "f": 2.0, "s": "b", "ts": _py("ts", 1000), "d": _py("d", 0 if null_d else 1)},
        "nullCount": {"i": 0, "f": 0, "s": 0, "ts": 0, "d": 1 if null_d else 0},
    }
    return {"rows": rows, "p": "a", "stats": stats_}


def test_all_match_decides_exact_types_only():
    """Integer and date bounds prove a filter for the whole file; float bounds only the shapes a
    NaN row (left out of min/max) makes TRUE: ``>``, ``>=``, ``<>``; string and timestamp bounds
    never do (truncation); nulls, missing stats and NULL literals never do."""
    fs = [_two_row_file(null_d=True)]
    table = _files_table(fs)
    i, d = col("i"), col("d")
    cases = {
        P.ge(i, 1): True,
        P.lt(i, 3): True,
        P.ne(i, 0): True,
        P.and_(P.gt(i, 0), P.eq(col("p"), "a")): True,
        P.or_(P.gt(i, 5), P.le(i, 2)): True,
        P.is_in(i, [0, 1, 2]): False,  # two distinct values: IN needs min == max
        P.not_in(i, [0, 7]): True,
        P.not_in(i, [0, 2]): False,
        P.is_in(i, [1]): False,
        P.is_not_null(i): True,
        P.not_(P.lt(i, 1)): True,
        P.gt(i, 1): False,
        P.ne(i, 2): False,
        P.eq(col("p"), "b"): False,
        P.le(d, _hlit("d", 5)): False,  # nullCount 1: a NULL row is not TRUE
        P.gt(col("f"), 0.5): True,  # rows 1.0 and 2.0, and a NaN would be above 0.5 too
        P.ge(col("f", pa.float64()), 1): True,  # an integer literal, exactly a float64
        P.ne(col("f"), 2.5): True,  # NaN differs from 2.5 as well
        P.ne(col("f"), 1.5): False,  # inside the bounds
        P.lt(col("f"), 5.0): False,  # a NaN row the bounds do not show would not be below 5
        P.le(col("f"), 5.0): False,
        P.eq(col("f"), 1.0): False,
        P.gt(col("f"), 1.0): False,
        P.gt(col("f"), NAN): False,
        P.ge(col("f"), NAN): False,
        P.ne(col("f"), NAN): False,
        P.ge(col("f", pa.float64()), 2**53 + 1): False,  # not exactly a float64
        P.not_in(col("f"), [5.0, -1.0]): True,  # '<>' for each value
        P.not_in(col("f"), [5.0, 1.5]): False,
        P.is_in(col("f"), [1.0, 2.0]): False,  # a NaN row is in no list
        P.gt(col("s"), ""): False,
        P.ge(col("ts"), _hlit("ts", -5000)): False,
        P.gt(i, _hlit("i", None)): False,
    }
    for pred, expected in cases.items():
        assert file_all_match_mask(pred, table, H_SCHEMA, ["p"]).to_pylist() == [expected], str(pred)
        _check_all_match(fs, pred)  # the file's rows agree with every True verdict
    no_stats = table.set_column(1, "stats", pa.nulls(1, H_STATS))
    assert file_all_match_mask(P.ge(i, 1), no_stats, H_SCHEMA, ["p"]).to_pylist() == [False]
    # an untyped column against an integer: the row filter compares without NaN's order
    assert file_all_match_mask(P.ge(col("f"), 1), table, H_SCHEMA, ["p"]).to_pylist() == [False]


def test_property_setup_prunes_something():
    """The generator's stats are good enough for pruning to happen (the property is not vacuous)."""
    table = _files_table([_two_row_file(null_d=False)])
    for pred in [
        P.gt(col("i"), 5),
        P.lt(col("f"), 0.5),
        P.gt(col("s"), "c"),
        P.gt(col("ts"), _hlit("ts", 2500)),
        P.eq(col("d"), _hlit("d", 5)),
        P.eq(col("p"), "b"),
        P.is_null(col("i")),
    ]:
        assert file_keep_mask(pred, table, H_SCHEMA, ["p"]).to_pylist() == [False], str(pred)


def test_mask_is_vectorised_over_many_files():
    n = 20000
    lo = pa.array(range(0, 10 * n, 10), pa.int64())
    mm = pa.StructArray.from_arrays([lo], names=["i"])
    mx = pa.StructArray.from_arrays([pc.add(lo, 9)], names=["i"])
    nc = pa.StructArray.from_arrays([pa.array([0] * n, pa.int64())], names=["i"])
    st_ = pa.StructArray.from_arrays(
        [pa.array([10] * n, pa.int64()), mm, mx, nc],
        names=["numRecords", "minValues", "maxValues", "nullCount"],
    )
    table = pa.table({"stats": st_})
    mask = file_keep_mask(P.and_(P.ge(i, 500), P.lt(i, 530)), table, SCHEMA, PARTS)
    assert pc.sum(mask).as_py() == 3


class _CountingCompute:
    """Stands in for ``pyarrow.compute`` in the skipping module and counts the kernel calls."""

    def __init__(self) -> None:
        self.calls = 0

    def __getattr__(self, name: str):
        f = getattr(pc, name)
        if not callable(f) or isinstance(f, type):
            return f

        def counted(*args, **kwargs):
            self.calls += 1
            return f(*args, **kwargs)

        return counted


def test_in_list_pruning_does_not_loop_over_the_values(monkeypatch):
    """A long IN list is pruned by a binary search of its sorted values: the number of Arrow
    kernel calls does not grow with the list (it was several per value, so a pushed list of
    20,000 ids took about a second to plan)."""
    import delta_datafusion.skipping as skipping

    n = 200
    lo = pa.array(range(0, 10 * n, 10), pa.int64())
    stats_ = pa.StructArray.from_arrays(
        [
            pa.array([10] * n, pa.int64()),
            pa.StructArray.from_arrays([lo], names=["i"]),
            pa.StructArray.from_arrays([pc.add(lo, 9)], names=["i"]),
            pa.StructArray.from_arrays([pa.array([0] * n, pa.int64())], names=["i"]),
        ],
        names=["numRecords", "minValues", "maxValues", "nullCount"],
    )
    table = pa.table({"stats": stats_})

    def calls(values: list[int]) -> tuple[int, int, int]:
        counter = _CountingCompute()
        monkeypatch.setattr(skipping, "pc", counter)
        keep = file_keep_mask(P.is_in(i, values), table, SCHEMA, PARTS)
        kept = pc.sum(keep).as_py()
        file_keep_mask(P.not_in(i, values), table, SCHEMA, PARTS)
        file_all_match_mask(P.is_in(i, values), table, SCHEMA, PARTS)
        file_all_match_mask(P.not_in(i, values), table, SCHEMA, PARTS)
        monkeypatch.setattr(skipping, "pc", pc)
        return counter.calls, kept, len({v // 10 for v in values if 0 <= v < 10 * n})

    few = calls([5, 17, 1999, 5000, -4, 10**6, 77, 1234])
    many = calls(list(range(-3000, 0)) + list(range(5, 10 * n, 40)) + list(range(10**6, 10**6 + 3000)))
    assert few[1] == few[2] and many[1] == many[2]  # the right files are kept
    assert many[0] == few[0], f"{few[0]} kernel calls for 8 values, {many[0]} for 6,050"
    short = calls([5, 17, 1999])  # below skipping._SEARCH_FROM: a comparison per value, cheaper
    assert short[1] == short[2]


def _hvalue(name: str):
    """Literal values for long IN lists: the pool's, plus others of the column's type."""
    other = {
        "i": st.integers(-20, 20),
        "f": st.floats(-20, 20, allow_nan=False),
        "s": st.text("abzé\U0001f600", max_size=3),
        "ts": st.integers(-6000, 6000),
        "d": st.integers(-3, 12),
    }[name]
    return st.one_of(st.sampled_from(H_POOLS[name]), other)


@st.composite
def _long_in(draw):
    if draw(st.integers(0, 5)) == 0:
        name, values = "p", draw(st.lists(st.sampled_from(["a", "b", "c"]), min_size=1, max_size=40))
        lits = [Literal(pa.scalar(v, pa.string())) for v in values]
        null = Literal(pa.scalar(None, pa.string()))
    else:
        name = draw(st.sampled_from(sorted(H_POOLS)))
        lits = [_hlit(name, v) for v in draw(st.lists(_hvalue(name), min_size=1, max_size=40))]
        null = _hlit(name, None)
    if draw(st.integers(0, 4)) == 0:
        lits.insert(draw(st.integers(0, len(lits))), null)
    return In(col(name), tuple(lits), draw(st.booleans()))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(fs=st.lists(_file(), min_size=1, max_size=6), pred=_long_in())
def test_in_lists_prune_like_their_comparisons(fs, pred):
    """``x IN (v1, ..., vn)`` keeps exactly the files ``x = v1 OR ... OR x = vn`` keeps, and
    ``x NOT IN (...)`` those ``x <> v1 AND ... AND x <> vn`` keeps (NULL items included); the
    same for files judged all-matching. The comparisons are pruned one value at a time, a list of
    8+ values by a binary search of its sorted values. No file holding a matching row is dropped, and no file
    holding a row that does not match is judged all-matching."""
    op = "!=" if pred.negated else "="
    parts = tuple(Comparison(op, pred.operand, v) for v in pred.values)
    spelled = P.And(parts) if pred.negated else P.Or(parts)
    table = _files_table(fs)
    keep = file_keep_mask(pred, table, H_SCHEMA, ["p"]).to_pylist()
    assert keep == file_keep_mask(spelled, table, H_SCHEMA, ["p"]).to_pylist(), str(pred)
    every = file_all_match_mask(pred, table, H_SCHEMA, ["p"]).to_pylist()
    assert every == file_all_match_mask(spelled, table, H_SCHEMA, ["p"]).to_pylist(), str(pred)
    row_filter = to_pyarrow(pred)
    for k, x in enumerate(fs):
        rows = _rows_table(x["rows"], x["p"])
        matches = rows.filter(row_filter).num_rows
        assert keep[k] or not matches, f"file {k} has {matches} matching rows but was dropped: {pred}\n{x}"
        assert not every[k] or matches == rows.num_rows, f"file {k}: {pred}\n{x}"


def test_in_lists_of_mixed_literal_types():
    """A hand-built list may mix literal types. Each type is pruned on its own, converted exactly
    to the bounds' type (or the bounds to its type); what converts exactly neither way keeps the
    files (2.5 against int64 bounds past 2**53, which a float64 cannot hold; strings against
    integers)."""

    def one(column: str, lo, hi) -> dict:
        return {"stats": stats(10, {column: lo}, {column: hi}, {column: 0})}

    big = 2**53
    entries = [
        one("i", 0, 10),
        one("i", 20, 30),
        one("i", big + 10, big + 20),
        one("f", 0.0, 1.5),
        one("i", 7, 7),
    ]
    cases = [
        (P.is_in(i, [lit(40.0), lit(5, pa.int32())]), [True, False, False, True, False]),
        (P.is_in(i, [lit(float(big + 16)), lit(100)]), [False, False, True, True, False]),
        (P.is_in(i, [lit(5, pa.int32()), lit(5)]), [True, False, False, True, False]),
        (P.is_in(i, [lit(2.5), lit(25)]), [True] * 5),
        (P.is_in(i, [lit("5"), lit(25)]), [True] * 5),
        (P.is_in(f, [lit(1), lit(7.5)]), [True] * 5),
        (P.is_in(f, [lit(2)]), [True, True, True, False, True]),
        (P.not_in(i, [lit(7.0), lit(100)]), [True, True, True, True, False]),
        (P.not_in(i, [lit(7.5)]), [True] * 5),
    ]
    for pred, expected in cases:
        assert keep(pred, entries) == expected, str(pred)


def test_in_lists_of_zoned_timestamps_prune_whatever_zone_names_them():
    """Zoned timestamps are instants: a list whose literals are in another zone than the column
    (``+00:00`` against ``UTC``, ``+02:00``) prunes as the same instants in the column's zone
    (the review: such a list kept every file)."""
    ts = col("ts")

    def at(hour: int) -> dt.datetime:
        return dt.datetime(2024, 1, 1, hour, tzinfo=UTC)

    entries = [{"stats": stats(10, {"ts": at(h)}, {"ts": at(h + 1)}, {"ts": 0})} for h in (0, 4, 8, 12)]
    plus2 = dt.timezone(dt.timedelta(hours=2))
    for zone, when in (("+00:00", at(4)), ("+02:00", at(8).astimezone(plus2))):
        values = [lit(pa.scalar(when, pa.timestamp("us", tz=zone)))]
        values += [
            lit(pa.scalar(at(20) + dt.timedelta(minutes=m), pa.timestamp("us", tz=zone))) for m in range(12)
        ]
        hit = 1 if zone == "+00:00" else 2
        for pred in (P.is_in(ts, values[:1]), P.is_in(ts, values)):  # a short list and a searched one
            assert keep(pred, entries) == [k == hit for k in range(4)], (zone, str(pred))
