"""Deletion vectors: Z85, descriptors, decoding, masks and the cache, checked on the real corpus.

The corpus DVs were written by Delta-Spark (files, inline) and by hand-written kernel test logs
(inline with the Rust z85 tail). Bitmaps are also cross-checked against an independent
bucket-by-bucket decoder of the portable 64-bit RoaringBitmap format defined in this file.
"""

from __future__ import annotations

import array
import json
import random
import shutil
import struct
import threading
import time
import zlib
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import CORPUS, add_action  # noqa: E402
from pyroaring import BitMap, BitMap64, FrozenBitMap64

from delta_datafusion.dv import (
    DV_MAGIC,
    DeletionVectorCache,
    DeletionVectorDescriptor,
    deleted_row_mask,
    load_deleted_rows,
    z85_decode,
)
from delta_datafusion.errors import DeletionVectorError, UnsupportedFeatureError
from delta_datafusion.storage import Storage

DV_TABLES = [
    "table-with-dv-small",
    "with-short-dv",
    "dv-with-columnmapping",
    "cdf-table-with-dv",
    "table_with_deletion_logs",
]
SMALL_DV = {
    "storageType": "u",
    "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
    "offset": 1,
    "sizeInBytes": 36,
    "cardinality": 2,
}
SMALL_DV_FILE = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
TAIL_DV = "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093"


@pytest.fixture(scope="module")
def corpus() -> Path:
    if not (CORPUS / "manifest.json").is_file():
        pytest.skip(
            f"conformance corpus not found at {CORPUS} (../shared/corpus next to the project, or $DELTA_DATAFUSION_CORPUS)"
        )
    return CORPUS


# -- independent reference codecs (used only to check the module) -------------------------------

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def _z85_chunk(value: int) -> str:
    digits = []
    for _ in range(5):
        value, d = divmod(value, 85)
        digits.append(_ALPHABET[d])
    return "".join(reversed(digits))


def _z85_encode(data: bytes, tail: str) -> str:
    """tail='crate': Rust z85 '#'-marked tail chunk; 'pad': zero-pad (Delta-Spark); 'short': n+1 chars."""
    cut = len(data) - len(data) % 4
    out = [_z85_chunk(int.from_bytes(data[i : i + 4], "big")) for i in range(0, cut, 4)]
    rest = data[cut:]
    if rest:
        if tail == "crate":
            missing = 4 - len(rest)
            out.append("#" * missing + _z85_chunk(int.from_bytes(rest, "big"))[missing:])
        elif tail == "pad":
            out.append(_z85_chunk(int.from_bytes(rest + b"\0" * (4 - len(rest)), "big")))
        else:
            out.append(_z85_chunk(int.from_bytes(rest + b"\0" * (4 - len(rest)), "big"))[: len(rest) + 1])
    return "".join(out)


def _roaring32_size(buf: bytes, pos: int) -> int:
    """Byte length of the portable 32-bit RoaringBitmap at ``pos`` (RoaringFormatSpec)."""
    cookie = int.from_bytes(buf[pos : pos + 4], "little")
    if cookie & 0xFFFF == 12347:
        n = (cookie >> 16) + 1
        run_flags = buf[pos + 4 : pos + 4 + (n + 7) // 8]
        p = pos + 4 + (n + 7) // 8
        has_offsets = n >= 4
    elif cookie == 12346:
        n = int.from_bytes(buf[pos + 4 : pos + 8], "little")
        run_flags = b""
        p = pos + 8
        has_offsets = True
    else:
        raise ValueError(f"bad 32-bit roaring cookie {cookie:#x} at {pos}")
    cards = [int.from_bytes(buf[p + 4 * i + 2 : p + 4 * i + 4], "little") + 1 for i in range(n)]
    p += 8 * n if has_offsets else 4 * n
    for i, card in enumerate(cards):
        if run_flags and run_flags[i // 8] >> (i % 8) & 1:
            p += 2 + 4 * int.from_bytes(buf[p : p + 2], "little")
        elif card > 4096:
            p += 8192
        else:
            p += 2 * card
    return p - pos


def _hand_decode(payload: bytes) -> BitMap64:
    """Portable 64-bit format by hand: u64 count, then (u32 key, 32-bit bitmap) per bucket."""
    count = int.from_bytes(payload[:8], "little")
    pos = 8
    parts = []
    for _ in range(count):
        high = int.from_bytes(payload[pos : pos + 4], "little")
        assert high < 1 << 31, "Delta requires the top bit of every key to be clear"
        size = _roaring32_size(payload, pos + 4)
        low = BitMap.deserialize(payload[pos + 4 : pos + 4 + size]).to_array()
        pos += 4 + size
        lows = pa.Array.from_buffers(pa.uint32(), len(low), [None, pa.py_buffer(low)])
        parts.append(pc.bit_wise_or(pc.cast(lows, pa.uint64()), pa.scalar(high << 32, pa.uint64())))
    assert pos == len(payload), f"{len(payload) - pos} trailing bytes"
    values = pa.concat_arrays(parts) if parts else pa.array([], pa.uint64())
    out = array.array("Q")
    if len(values):
        out.frombytes(memoryview(values.buffers()[1])[values.offset * 8 : (values.offset + len(values)) * 8])
    return BitMap64(out)


def _hand_encode(values: list[int]) -> bytes:
    """Portable 64-bit serialization built from 32-bit pieces (independent of BitMap64.serialize)."""
    buckets: dict[int, list[int]] = {}
    for v in values:
        buckets.setdefault(v >> 32, []).append(v & 0xFFFFFFFF)
    out = bytearray(len(buckets).to_bytes(8, "little"))
    for high in sorted(buckets):
        low = BitMap(buckets[high])
        low.run_optimize()
        out += high.to_bytes(4, "little") + low.serialize()
    return bytes(out)


def _frame(payload: bytes) -> bytes:
    data = struct.pack("<i", DV_MAGIC) + payload
    return len(data).to_bytes(4, "big") + data + zlib.crc32(data).to_bytes(4, "big")


# -- corpus helpers -----------------------------------------------------------------------------


def _commits(table: Path) -> list[tuple[int, list[dict[str, Any]]]]:
    out = []
    for f in sorted((table / "_delta_log").glob("*.json")):
        out.append(
            (int(f.name.split(".")[0]), [json.loads(line) for line in f.read_text().splitlines() if line])
        )
    return out


def _dv_dicts(table: Path) -> list[tuple[int, str, dict[str, Any]]]:
    found = []
    for version, actions in _commits(table):
        for action in actions:
            for kind in ("add", "remove"):
                dv = (action.get(kind) or {}).get("deletionVector")
                if dv:
                    found.append((version, kind, dv))
    return found


def _active_adds(table: Path, version: int | None = None) -> dict[str, dict[str, Any]]:
    """JSON-only replay (these tables' commits are complete): removes, then adds, per commit."""
    active: dict[str, dict[str, Any]] = {}
    for v, actions in _commits(table):
        if version is not None and v > version:
            break
        for action in actions:
            if "remove" in action:
                active.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                active[action["add"]["path"]] = action["add"]
    return active


def _payload(table: Path, dv: dict[str, Any]) -> bytes:
    """Bitmap bytes after the magic, sliced directly from the log / file for the hand decoder."""
    if dv["storageType"] == "i":
        return z85_decode(dv["pathOrInlineDv"])[4 : dv["sizeInBytes"]]
    path = DeletionVectorDescriptor.from_dict(dv).file_path(Storage(str(table)))
    raw = Path(path).read_bytes()[dv["offset"] :]
    assert int.from_bytes(raw[:4], "big") == dv["sizeInBytes"]
    return raw[8 : 4 + dv["sizeInBytes"]]


def _read_rows(table: Path, version: int | None, batch_size: int | None = None) -> pa.Table:
    storage = Storage(str(table))
    pieces = []
    for path, add in sorted(_active_adds(table, version).items()):
        pf = pq.ParquetFile(table / unquote(path))
        dv = add.get("deletionVector")
        deleted = load_deleted_rows(DeletionVectorDescriptor.from_dict(dv), storage) if dv else BitMap64()
        if batch_size is None:
            data = pf.read()
            pieces.append(data.filter(deleted_row_mask(deleted, 0, data.num_rows)))
            continue
        start = 0
        for batch in pf.iter_batches(batch_size=batch_size):
            pieces.append(
                pa.Table.from_batches([batch.filter(deleted_row_mask(deleted, start, batch.num_rows))])
            )
            start += batch.num_rows
    return pa.concat_tables(pieces)


def _sorted_rows(t: pa.Table) -> list[dict[str, Any]]:
    return t.sort_by([(name, "ascending") for name in t.column_names]).to_pylist()


# -- Z85 ----------------------------------------------------------------------------------------


def test_z85_rfc_vector() -> None:
    assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    assert z85_decode("") == b""


def test_z85_crate_tail_chunk() -> None:
    # "##093" -> "00093" = 0x00000300, two leading bytes missing -> 03 00.
    assert z85_decode("##093") == b"\x03\x00"
    payload = struct.pack("<i", DV_MAGIC) + BitMap64([3]).serialize()
    assert len(payload) == 34
    # The corpus string is exactly what the crate convention produces for this 34-byte DV.
    assert _z85_encode(payload, "crate") == TAIL_DV
    assert z85_decode(TAIL_DV) == payload


@pytest.mark.parametrize("tail", ["crate", "pad", "short"])
def test_z85_round_trip_all_tail_lengths(tail: str) -> None:
    rng = random.Random(7)
    for n in range(0, 41):
        data = bytes(rng.randrange(256) for _ in range(n)) if n % 3 else b"\xff" * n
        decoded = z85_decode(_z85_encode(data, tail))
        expected = data + b"\0" * (-n % 4) if tail == "pad" else data
        assert decoded == expected, (tail, n)


def test_z85_short_tail_uses_n_minus_1_bytes() -> None:
    assert len(z85_decode("HelloWor")) == 4 + 2
    assert z85_decode("Hello" + _z85_encode(b"\xab\xcd", "short")) == bytes.fromhex("864FD26F") + b"\xab\xcd"


@pytest.mark.parametrize(
    "text, message",
    [
        ("Hello~~", "invalid z85 character"),
        ("HelloW", "1-character chunk"),
        ("%%%%%", "overflows"),
        ("####0", "tail"),
    ],
)
def test_z85_rejects_bad_input(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        z85_decode(text)


# -- descriptor ---------------------------------------------------------------------------------


def test_descriptor_from_dict_and_unique_id() -> None:
    d = DeletionVectorDescriptor.from_dict(SMALL_DV)
    assert (d.storage_type, d.path_or_inline_dv, d.offset, d.size_in_bytes, d.cardinality) == (
        "u",
        "vBn[lx{q8@P<9BNH/isA",
        1,
        36,
        2,
    )
    assert d.unique_id == "uvBn[lx{q8@P<9BNH/isA@1"
    inline = DeletionVectorDescriptor.from_dict(
        {"storageType": "i", "pathOrInlineDv": TAIL_DV, "offset": None, "sizeInBytes": 34, "cardinality": 1}
    )
    assert inline.unique_id == "i" + TAIL_DV
    assert inline.file_path(Storage("/tmp")) is None


@pytest.mark.parametrize("field", ["storageType", "pathOrInlineDv", "sizeInBytes", "cardinality"])
def test_descriptor_missing_field(field: str) -> None:
    d = dict(SMALL_DV)
    del d[field]
    with pytest.raises(DeletionVectorError, match=f"missing required field '{field}'"):
        DeletionVectorDescriptor.from_dict(d)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"storageType": "x"}, "unknown deletion vector storageType 'x'"),
        ({"sizeInBytes": -1}, "size_in_bytes must be a non-negative"),
        ({"offset": "abc"}, "non-integer"),
        ({"pathOrInlineDv": "short"}, "shorter than the 20-character"),
        ({"storageType": "i", "offset": 3}, "must not have an offset"),
    ],
)
def test_descriptor_rejects_bad_values(change: dict[str, Any], message: str) -> None:
    with pytest.raises(DeletionVectorError, match=message):
        DeletionVectorDescriptor.from_dict({**SMALL_DV, **change})


def test_file_path_protocol_examples(tmp_path: Path) -> None:
    # PROTOCOL.md JSON example 1 (relative with random prefix) and 2 (absolute URI).
    storage = Storage("memory://mytable")
    rel = DeletionVectorDescriptor("u", "ab^-aqEH.-t@S}K{vb[*k^", 4, 40, 6)
    # the memory filesystem names its files from its root: /mytable
    assert rel.file_path(storage) == "/mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert rel.unique_id == "uab^-aqEH.-t@S}K{vb[*k^@4"
    absolute = DeletionVectorDescriptor(
        "p", "memory://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", 4, 40, 6
    )
    assert absolute.file_path(storage) == "/mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    # the example's s3:// vector is on another store than this table's: not read from this one
    elsewhere = DeletionVectorDescriptor(
        "p", "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin", 4, 40, 6
    )
    with pytest.raises(UnsupportedFeatureError, match=r"on another filesystem \(s3\)"):
        elsewhere.file_path(storage)
    # 'p' paths are URL-encoded like add paths.
    encoded = DeletionVectorDescriptor("p", f"file://{tmp_path}/dv%20dir/x%25y.bin", 1, 40, 6)
    assert encoded.file_path(Storage(str(tmp_path))) == f"{tmp_path}/dv dir/x%y.bin"
    no_prefix = DeletionVectorDescriptor.from_dict(SMALL_DV)
    assert no_prefix.file_path(Storage(str(tmp_path))) == f"{tmp_path}/{SMALL_DV_FILE}"
    # decoded once only: %2525 names a '%25' folder, %23 a '#' (a file name character here)
    twice = DeletionVectorDescriptor("p", f"file://{tmp_path}/a%2525/b%23c/x.bin", 1, 40, 6)
    assert twice.file_path(Storage(str(tmp_path))) == f"{tmp_path}/a%25/b#c/x.bin"


def test_absolute_dv_path_is_decoded_once(corpus: Path, tmp_path: Path) -> None:
    """A 'p' deletion vector of a table in folder 'dv 100%25' is read from that folder, not from
    a sibling 'dv 100%' holding another DV file of the same name (the log's URI was decoded twice,
    and the sibling's DV deleted other rows, silently)."""
    from urllib.parse import quote

    from delta_datafusion import DeltaTable

    root = tmp_path / "dv 100%25"
    shutil.copytree(corpus / "tables" / "table-with-dv-small", root)
    dv_file = next(root.glob("deletion_vector_*.bin"))
    log = root / "_delta_log" / "00000000000000000001.json"
    actions = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    for a in actions:
        if "add" in a and a["add"].get("deletionVector"):
            a["add"]["deletionVector"].update(storageType="p", pathOrInlineDv="file://" + quote(str(dv_file)))
    log.write_text("".join(json.dumps(a) + "\n" for a in actions))
    decoy = tmp_path / "dv 100%"
    decoy.mkdir()
    (decoy / dv_file.name).write_bytes(b"\x01" + _frame(BitMap64([8, 9]).serialize()))  # rows 8, 9
    want = pq.read_table(corpus / "expected" / "table-with-dv-small" / "snapshot.parquet")
    got = DeltaTable(str(root)).snapshot().scan().to_table()
    assert sorted(got.column("value").to_pylist()) == sorted(want.column("value").to_pylist())


# -- corpus -------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", DV_TABLES)
def test_every_corpus_dv_loads(corpus: Path, name: str) -> None:
    table = corpus / "tables" / name
    storage = Storage(str(table))
    cache = DeletionVectorCache()
    dvs = _dv_dicts(table)
    assert dvs, f"no deletion vectors found in {table}"
    for version, kind, dv in dvs:
        descriptor = DeletionVectorDescriptor.from_dict(dv)
        bitmap = load_deleted_rows(descriptor, storage)
        assert isinstance(bitmap, BitMap64)
        assert len(bitmap) == dv["cardinality"], (version, kind, dv)
        # pyroaring reads the Delta (portable) layout exactly like the bucket-by-bucket decoder.
        assert bitmap == _hand_decode(_payload(table, dv)), (version, kind, dv)
        cached = cache.get(descriptor, storage)
        assert isinstance(cached, FrozenBitMap64) and cached == bitmap


def test_every_corpus_dv_file_decodes(corpus: Path) -> None:
    # Includes the five DV files of dv-with-columnmapping that no JSON commit references.
    files = sorted((corpus / "tables").glob("*/deletion_vector_*.bin"))
    assert len(files) >= 20
    for path in files:
        raw = path.read_bytes()
        size = int.from_bytes(raw[1:5], "big")
        expected = _hand_decode(raw[9 : 5 + size])
        name = path.name.removeprefix("deletion_vector_").removesuffix(".bin")
        descriptor = DeletionVectorDescriptor("p", str(path), 1, size, len(expected))
        assert load_deleted_rows(descriptor, Storage(str(path.parent))) == expected, name


@pytest.mark.parametrize("name", DV_TABLES)
def test_latest_row_count_matches_expected(corpus: Path, name: str) -> None:
    table = corpus / "tables" / name
    storage = Storage(str(table))
    rows = 0
    for add in _active_adds(table).values():
        num_records = json.loads(add["stats"])["numRecords"]
        dv = add.get("deletionVector")
        deleted = load_deleted_rows(DeletionVectorDescriptor.from_dict(dv), storage) if dv else BitMap64()
        rows += deleted_row_mask(deleted, 0, num_records).true_count
    assert rows == pq.read_metadata(corpus / "expected" / name / "snapshot.parquet").num_rows


@pytest.mark.parametrize(
    "name, version, expected",
    [
        ("table-with-dv-small", None, "snapshot"),
        ("table-with-dv-small", 0, "snapshot_v0"),
        ("with-short-dv", None, "snapshot"),
        ("cdf-table-with-dv", 1, "snapshot_v1"),
        ("cdf-table-with-dv", 3, "snapshot_v3"),
        ("cdf-table-with-dv", 5, "snapshot_v5"),
        ("cdf-table-with-dv", None, "snapshot"),
    ],
)
def test_rows_after_deletion_match_expected(
    corpus: Path, name: str, version: int | None, expected: str
) -> None:
    want = pq.read_table(corpus / "expected" / name / f"{expected}.parquet")
    got = _read_rows(corpus / "tables" / name, version).select(want.column_names).cast(want.schema)
    assert _sorted_rows(got) == _sorted_rows(want)
    for batch_size in (1, 3, 4):
        chunked = _read_rows(corpus / "tables" / name, version, batch_size)
        assert _sorted_rows(chunked.select(want.column_names).cast(want.schema)) == _sorted_rows(want)


def test_table_with_dv_small_rows(corpus: Path) -> None:
    table = corpus / "tables" / "table-with-dv-small"
    deleted = load_deleted_rows(DeletionVectorDescriptor.from_dict(SMALL_DV), Storage(str(table)))
    assert deleted == BitMap64([0, 9])
    data = pq.read_table(table / "part-00000-fae5310a-a37d-4e51-827b-c3d5516560ca-c000.snappy.parquet")
    kept = data.filter(deleted_row_mask(deleted, 0, data.num_rows))
    want = pq.read_table(corpus / "expected" / "table-with-dv-small" / "snapshot.parquet")
    assert sorted(kept.column("value").to_pylist()) == sorted(want.column("value").to_pylist())


def test_inline_dvs_of_cdf_table(corpus: Path) -> None:
    storage = Storage(str(corpus / "tables" / "cdf-table-with-dv"))
    by_version = {
        v: dv for v, kind, dv in _dv_dicts(corpus / "tables" / "cdf-table-with-dv") if kind == "add"
    }
    rows = {
        v: set(load_deleted_rows(DeletionVectorDescriptor.from_dict(dv), storage))
        for v, dv in by_version.items()
    }
    # Commit 5's 45-character / 34-byte DV ends in the Rust z85 tail "##093": row 3, as the
    # corpus README states (a strict RFC decode would give row 28168).
    assert by_version[5]["pathOrInlineDv"] == TAIL_DV and by_version[5]["sizeInBytes"] == 34
    assert rows == {1: {0, 9}, 3: {0, 1, 4, 5}, 4: {0, 5}, 5: {3}}


def test_inline_encodings_agree(tmp_path: Path) -> None:
    payload = struct.pack("<i", DV_MAGIC) + _hand_encode([3, 70000, (5 << 32) + 1])
    storage = Storage(str(tmp_path))
    for tail in ("crate", "pad", "short"):
        d = DeletionVectorDescriptor("i", _z85_encode(payload, tail), None, len(payload), 3)
        assert load_deleted_rows(d, storage) == BitMap64([3, 70000, (5 << 32) + 1]), tail


def test_protocol_inline_example_is_rejected_clearly() -> None:
    # PROTOCOL.md "JSON Example 3" predates the portable format: its bytes start with the native
    # magic 1681511376 written big-endian, which neither Delta-Spark (little-endian reader) nor
    # delta-kernel-rs accept. It must fail loudly, not decode to garbage.
    example = DeletionVectorDescriptor("i", "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L", None, 40, 6)
    with pytest.raises(DeletionVectorError, match="inline DV: bad magic number"):
        load_deleted_rows(example, Storage("/tmp"))


# -- bitmap format vs pyroaring -----------------------------------------------------------------


def _sample_values() -> list[int]:
    rng = random.Random(42)
    values = set(rng.sample(range(1 << 20), 5000))  # array and bitmap containers
    values.update(range(2_000_000, 2_100_000))  # run container
    values.update({(1 << 32) - 1, 1 << 32, (1 << 32) + 17, (7 << 32) + 65536})  # bucket edges
    values.update(((1 << 31) - 1 << 32) + v for v in (0, 99, 1 << 31))  # largest legal key
    return sorted(values)


def test_bitmap64_deserialize_matches_hand_decoder() -> None:
    values = _sample_values()
    payload = _hand_encode(values)
    expected = BitMap64(values)
    assert BitMap64.deserialize(payload) == expected
    assert _hand_decode(payload) == expected
    # pyroaring's own serialization is the same portable layout.
    assert _hand_decode(expected.serialize()) == expected
    assert _hand_decode(_hand_encode([])) == BitMap64() == BitMap64.deserialize(_hand_encode([]))


def test_multi_dv_file_with_offsets_and_prefix(tmp_path: Path) -> None:
    first, second = _sample_values(), [0, 1, 2, 1 << 40]
    body = b"\x01"
    offsets = []
    for values in (first, second):
        offsets.append(len(body))
        body += _frame(_hand_encode(values))
    storage = Storage(str(tmp_path))
    relative = DeletionVectorDescriptor("u", "xy" + "vBn[lx{q8@P<9BNH/isA", offsets[1], 0, 4)
    path = Path(relative.file_path(storage))
    assert path == tmp_path / "xy" / SMALL_DV_FILE
    path.parent.mkdir()
    path.write_bytes(body)
    sizes = [len(_hand_encode(v)) + 4 for v in (first, second)]
    for values, offset, size in zip((first, second), offsets, sizes, strict=True):
        for d in (
            DeletionVectorDescriptor("u", "xy" + "vBn[lx{q8@P<9BNH/isA", offset, size, len(values)),
            DeletionVectorDescriptor("p", path.as_uri(), offset, size, len(values)),
        ):
            assert load_deleted_rows(d, storage) == BitMap64(values)
    # An absent offset means the first DV, right after the version byte.
    first_dv = DeletionVectorDescriptor("p", str(path), None, sizes[0], len(first))
    assert load_deleted_rows(first_dv, storage) == BitMap64(first)


# -- masks --------------------------------------------------------------------------------------


def _reference_mask(deleted: set[int], start: int, length: int) -> list[bool]:
    return [start + i not in deleted for i in range(length)]


def test_mask_windows_agree_with_whole_file() -> None:
    rng = random.Random(3)
    values = sorted(set(rng.sample(range(100_000), 9000)) | set(range(40_000, 40_500)) | {99_999})
    deleted = BitMap64(values)
    whole = deleted_row_mask(deleted, 0, 100_000)
    assert whole.type == pa.bool_() and whole.null_count == 0
    assert whole.to_pylist() == _reference_mask(set(values), 0, 100_000)
    for size in (97, 1000, 4096, 65536, 100_000):
        parts = [deleted_row_mask(deleted, s, min(size, 100_000 - s)) for s in range(0, 100_000, size)]
        assert pa.concat_arrays(parts).equals(whole), size
    singles = [deleted_row_mask(deleted, s, 1) for s in range(39_990, 40_510)]
    assert pa.concat_arrays(singles).equals(whole.slice(39_990, 520))
    for start, length in ((0, 0), (5, 10), (40_000, 500), (39_999, 502), (99_990, 30), (200_000, 10)):
        got = deleted_row_mask(deleted, start, length)
        assert got.to_pylist() == _reference_mask(set(values), start, length), (start, length)


def test_mask_across_bucket_boundary() -> None:
    base = (1 << 32) - 4
    deleted = BitMap64([base + 1, base + 4, base + 5, 3])
    assert deleted_row_mask(deleted, base, 8).to_pylist() == [i not in (1, 4, 5) for i in range(8)]
    assert deleted_row_mask(FrozenBitMap64(deleted), 0, 5).to_pylist() == [True, True, True, False, True]


def test_mask_rejects_negative_window() -> None:
    with pytest.raises(ValueError):
        deleted_row_mask(BitMap64(), -1, 3)


# -- corruption ---------------------------------------------------------------------------------


@pytest.fixture
def dv_copy(corpus: Path, tmp_path: Path) -> tuple[Storage, Path]:
    shutil.copy(corpus / "tables" / "table-with-dv-small" / SMALL_DV_FILE, tmp_path / SMALL_DV_FILE)
    (tmp_path / SMALL_DV_FILE).chmod(0o644)
    return Storage(str(tmp_path)), tmp_path / SMALL_DV_FILE


def _rewrite(path: Path, edit: Any) -> None:
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(edit(data)))


def _fix_crc(data: bytearray) -> bytearray:
    size = int.from_bytes(data[1:5], "big")
    data[5 + size : 9 + size] = zlib.crc32(data[5 : 5 + size]).to_bytes(4, "big")
    return data


def _set(data: bytearray, index: int, value: int) -> bytearray:
    data[index] = value
    return data


@pytest.mark.parametrize(
    "edit, dv_change, message",
    [
        (lambda d: _set(d, 40, d[40] ^ 0x01), {}, "checksum mismatch"),
        (lambda d: _set(d, 5, d[5] ^ 0xFF), {}, "bad magic number"),
        (lambda d: _fix_crc(_set(d, 5, d[5] ^ 0xFF)), {}, "bad magic number"),
        (lambda d: d[:-3], {}, "truncated"),
        (lambda d: d[:3], {}, "truncated"),
        (lambda d: b"", {}, "file is empty"),
        (lambda d: _set(d, 0, 2), {}, "unsupported DV file format version 2"),
        (lambda d: _set(d, 4, 40), {}, "size mismatch, file says 40 bytes, log says 36"),
        (lambda d: d, {"sizeInBytes": 30}, "size mismatch, file says 36 bytes, log says 30"),
        (lambda d: d, {"cardinality": 3}, "cardinality mismatch, bitmap has 2 rows, log says 3"),
        (lambda d: _fix_crc(_set(d, 21, 0x99)), {}, "corrupt roaring bitmap"),
        # an offset past the end: said so, not "truncated" (near the start, and far beyond it)
        (lambda d: d, {"offset": 1000}, r"\(offset 1000\): the offset is at or beyond the end of the file"),
        (
            lambda d: d,
            {"offset": 100_000},
            r"\(offset 100000\): the offset is at or beyond the end of the file",
        ),
    ],
)
def test_corrupt_dv_file(
    dv_copy: tuple[Storage, Path], edit: Any, dv_change: dict[str, Any], message: str
) -> None:
    storage, path = dv_copy
    _rewrite(path, edit)
    with pytest.raises(DeletionVectorError, match=message) as info:
        load_deleted_rows(DeletionVectorDescriptor.from_dict({**SMALL_DV, **dv_change}), storage)
    assert SMALL_DV_FILE in str(info.value)


def test_missing_dv_file(dv_copy: tuple[Storage, Path]) -> None:
    storage, path = dv_copy
    path.unlink()
    with pytest.raises(DeletionVectorError, match="file not found") as info:
        load_deleted_rows(DeletionVectorDescriptor.from_dict(SMALL_DV), storage)
    assert SMALL_DV_FILE in str(info.value)


def test_untouched_copy_loads(dv_copy: tuple[Storage, Path]) -> None:
    storage, _ = dv_copy
    assert load_deleted_rows(DeletionVectorDescriptor.from_dict(SMALL_DV), storage) == BitMap64([0, 9])


@pytest.mark.parametrize(
    "text, size, cardinality, message",
    [
        (TAIL_DV[:-5] + "~~~~~", 34, 1, "invalid z85 character"),
        (TAIL_DV, 40, 1, "decodes to 34 bytes but sizeInBytes is 40"),
        (TAIL_DV, 30, 1, "decodes to 34 bytes but sizeInBytes is 30"),
        (TAIL_DV, 34, 2, "cardinality mismatch"),
        ("0" * 5 + TAIL_DV[5:], 34, 1, "bad magic number 0"),
        (_z85_encode(struct.pack("<i", DV_MAGIC - 1) + b"\0" * 8, "crate"), 12, 0, "native RoaringBitmap"),
        (_z85_encode(struct.pack("<i", DV_MAGIC) + b"\x01" + b"\0" * 7, "crate"), 12, 0, "corrupt roaring"),
    ],
)
def test_corrupt_inline_dv(text: str, size: int, cardinality: int, message: str) -> None:
    with pytest.raises(DeletionVectorError, match=message) as info:
        load_deleted_rows(DeletionVectorDescriptor("i", text, None, size, cardinality), Storage("/tmp"))
    assert str(info.value).startswith("inline DV")


# -- cache --------------------------------------------------------------------------------------


class _CountingStorage(Storage):
    def __init__(self, uri: str):
        super().__init__(uri)
        self.reads = 0
        self._count_lock = threading.Lock()

    def read_range(self, path: str, offset: int, length: int) -> bytes:
        with self._count_lock:
            self.reads += 1
        time.sleep(0.05)  # widen the window in which other threads ask for the same DV
        return super().read_range(path, offset, length)


def test_cache_decodes_once_across_threads(dv_copy: tuple[Storage, Path]) -> None:
    _, path = dv_copy
    storage = _CountingStorage(str(path.parent))
    cache = DeletionVectorCache()
    descriptor = DeletionVectorDescriptor.from_dict(SMALL_DV)
    results: list[Any] = []
    barrier = threading.Barrier(16)

    def worker() -> None:
        barrier.wait()
        results.append(cache.get(descriptor, storage))

    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert storage.reads == 1
    assert len(results) == 16 and all(r is results[0] for r in results)
    assert results[0] == BitMap64([0, 9]) and isinstance(results[0], FrozenBitMap64)
    assert len(cache) == 1


def test_cache_keys_by_table_and_does_not_cache_errors(dv_copy: tuple[Storage, Path], tmp_path: Path) -> None:
    _, path = dv_copy
    other_root = tmp_path / "other"
    other_root.mkdir()
    cache = DeletionVectorCache(max_entries=2)
    descriptor = DeletionVectorDescriptor.from_dict(SMALL_DV)
    other = _CountingStorage(str(other_root))
    with pytest.raises(DeletionVectorError, match="file not found"):
        cache.get(descriptor, other)
    assert len(cache) == 0
    shutil.copy(path, other_root / SMALL_DV_FILE)
    assert cache.get(descriptor, other) == BitMap64([0, 9])
    assert cache.get(descriptor, _CountingStorage(str(path.parent))) == BitMap64([0, 9])
    assert len(cache) == 2
    reads = other.reads
    cache.get(descriptor, other)
    assert other.reads == reads
    inline = DeletionVectorDescriptor("i", TAIL_DV, None, 34, 1)
    assert cache.get(inline, other) == BitMap64([3])
    assert len(cache) == 2  # least recently used entry evicted
    cache.clear()
    assert len(cache) == 0


def _inline_dv(rows: list[int]) -> dict[str, Any]:
    """An inline deletion vector descriptor deleting ``rows``."""
    payload = struct.pack("<i", DV_MAGIC) + _hand_encode(rows)
    return {
        "storageType": "i",
        "pathOrInlineDv": _z85_encode(payload, "pad"),
        "sizeInBytes": len(payload),
        "cardinality": len(rows),
    }


def _dv_protocol(features: list[str]) -> dict[str, Any]:
    writer = features + ["changeDataFeed"]
    return {
        "protocol": {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": features,
            "writerFeatures": writer,
        }
    }


def _metadata_action(schema: dict[str, Any], configuration: dict[str, str]) -> dict[str, Any]:
    md = {"id": "t", "format": {"provider": "parquet", "options": {}}, "schemaString": json.dumps(schema)}
    return {"metaData": {**md, "partitionColumns": [], "configuration": configuration}}


def _write_log(table: Path, commits: list[list[dict[str, Any]]]) -> None:
    for version, actions in enumerate(commits):
        (table / "_delta_log" / f"{version:020d}.json").write_text(
            "\n".join(json.dumps(a) for a in actions) + "\n"
        )


def test_deletion_vector_on_a_file_storing_string_views(tmp_path: Path) -> None:
    """delta-rs UPDATE/MERGE store string columns as string_view; a later DV on such a file used
    to fail every read (pyarrow cannot filter string_view), through the scan, SQL and the change
    feed alike."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    data = pa.table(
        {
            "id": pa.array(range(5), pa.int64()),
            "s": pa.array(list("abcde"), pa.string_view()),
            "tags": pa.array([["x"], [], ["y", "z"], None, ["w"]], pa.list_(pa.string_view())),
        }
    )
    pq.write_table(data, table / "part-0.parquet")
    assert pq.read_schema(table / "part-0.parquet").field("s").type == pa.string_view()
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "s", "type": "string", "nullable": True, "metadata": {}},
            {
                "name": "tags",
                "type": {"type": "array", "elementType": "string", "containsNull": True},
                "nullable": True,
                "metadata": {},
            },
        ],
    }
    add = add_action(table, "part-0.parquet")
    conf = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    _write_log(
        table,
        [
            [_dv_protocol(["deletionVectors"]), _metadata_action(schema, conf), {"add": add}],
            [
                {"remove": {**add, "deletionTimestamp": 1, "extendedFileMetadata": True}},
                {"add": {**add, "deletionVector": _inline_dv([0, 2])}},
            ],
        ],
    )
    expected = [(1, "b", []), (3, "d", None), (4, "e", ["w"])]
    got = dd.DeltaTable(str(table)).snapshot().scan().to_table()
    assert sorted(zip(*(got.column(c).to_pylist() for c in ("id", "s", "tags")), strict=True)) == expected
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(table))
    rows = ctx.sql("SELECT id, s FROM t WHERE s <> 'x' ORDER BY id").to_pylist()
    assert [(r["id"], r["s"]) for r in rows] == [(1, "b"), (3, "d"), (4, "e")]
    feed = ctx.sql("SELECT id, _change_type FROM table_changes('t', 1, 1) ORDER BY id").to_pylist()
    assert [(r["id"], r["_change_type"]) for r in feed] == [(0, "delete"), (2, "delete")]


def _field(name: str, typ: Any, mapped: bool, fid: int) -> dict[str, Any]:
    md = {"delta.columnMapping.physicalName": f"p-{name}", "delta.columnMapping.id": fid} if mapped else {}
    return {"name": name, "type": typ, "nullable": True, "metadata": md}


@pytest.mark.parametrize("change", ["reorder", "widen", "add"])
def test_deletion_vector_on_a_file_whose_struct_changed_since(tmp_path: Path, change: str) -> None:
    """A struct's fields reordered (Spark: ALTER COLUMN st.b FIRST), widened or added after a file
    was written, then a DV on that file: the row-selection path matched fields by position (values
    swapped) or, under column mapping, by logical name (every field NULL)."""
    from datafusion import SessionContext

    import delta_datafusion as dd

    mapped = change != "reorder"
    phys = (lambda n: f"p-{n}") if mapped else (lambda n: n)
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    st = pa.struct([(phys("a"), pa.int32()), (phys("b"), pa.int32())])
    pq.write_table(
        pa.table(
            {
                phys("id"): pa.array([1, 2, 3], pa.int64()),
                phys("st"): pa.array([{phys("a"): i, phys("b"): 100 * i} for i in (1, 2, 3)], st),
            }
        ),
        table / "f1.parquet",
    )

    def metadata(st_fields: list[dict[str, Any]]) -> dict[str, Any]:
        schema = {
            "type": "struct",
            "fields": [
                _field("id", "long", mapped, 1),
                _field("st", {"type": "struct", "fields": st_fields}, mapped, 2),
            ],
        }
        conf = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
        if mapped:
            conf |= {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "5"}
        return _metadata_action(schema, conf)

    a, b = _field("a", "integer", mapped, 3), _field("b", "integer", mapped, 4)
    later = {
        "reorder": [b, a],
        "widen": [_field("a", "long", mapped, 3), b],
        "add": [a, b, _field("c", "string", mapped, 5)],
    }[change]
    features = (
        ["deletionVectors"]
        + (["columnMapping"] if mapped else [])
        + (["typeWidening"] if change == "widen" else [])
    )
    add = add_action(table, "f1.parquet", stats=json.dumps({"numRecords": 3}))
    _write_log(
        table,
        [
            [_dv_protocol(features), metadata([a, b]), {"add": add}],
            [metadata(later)],
            [
                {"remove": {**add, "deletionTimestamp": 1}},
                {"add": {**add, "deletionVector": _inline_dv([1])}},
            ],
        ],
    )

    def rows(version: int, sql: str = "SELECT id, st FROM t ORDER BY id") -> list[dict[str, Any]]:
        ctx = SessionContext()
        dd.register(ctx)
        dd.register_table(ctx, "t", str(table), version=version)
        return ctx.sql(sql).to_arrow_table().to_pylist()

    before = rows(1)  # no DV: the fast path, already right
    assert before[1]["st"]["a"] == 2 and before[1]["st"]["b"] == 200
    assert rows(2) == [r for r in before if r["id"] != 2]
    feed = rows(2, "SELECT id, st, _change_type FROM table_changes('t', 2, 2)")
    assert feed == [{**before[1], "_change_type": "delete"}]


def test_deletion_vector_on_a_file_storing_a_column_as_another_type_names_the_file(tmp_path: Path) -> None:
    """The row-selection path converts each file column to the table type; a file that cannot be
    converted (strings for a long column) fails naming the file, the column and both types, as
    the plain path does (it used to give only 'cannot convert column of type string')."""
    import delta_datafusion as dd

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": ["1", "2x", "3"]}), table / "part-0.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    add = add_action(table, "part-0.parquet", deletionVector=_inline_dv([0]))
    conf = {"delta.enableDeletionVectors": "true"}
    _write_log(table, [[_dv_protocol(["deletionVectors"]), _metadata_action(schema, conf), {"add": add}]])
    with pytest.raises(dd.DeltaError) as info:
        dd.DeltaTable(str(table)).snapshot().scan().to_table()
    msg = str(info.value)
    assert (
        f"data file {table / 'part-0.parquet'} stores column 'id' as string, but the table schema says int64"
        in msg
    )
    assert "version 0" in msg


@pytest.mark.parametrize("remove_stats", [True, False])
def test_change_feed_deleted_rows_outside_the_new_adds_tight_bounds(
    tmp_path: Path, remove_stats: bool
) -> None:
    """A DELETE by deletion vector re-adds the file with statistics that may be tight to the rows
    still live (max id 3 once id 4 is deleted). The change feed's delete row for id 4 lies outside
    them: a filter on id pruned it away (filtered feeds must be subsets of the unfiltered one)."""
    from datafusion import SessionContext

    import delta_datafusion as dd
    from delta_datafusion.changes import clear_cache

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(5), pa.int64())}), table / "part-0.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    conf = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}

    def stats(hi: int) -> str:
        bounds = {"minValues": {"id": 0}, "maxValues": {"id": hi}, "nullCount": {"id": 0}}
        return json.dumps({"numRecords": 5, **bounds, "tightBounds": True})

    add = add_action(table, "part-0.parquet")
    removed = {**add, "deletionTimestamp": 1, "extendedFileMetadata": True}
    if remove_stats:
        removed["stats"] = stats(4)
    _write_log(
        table,
        [
            [
                _dv_protocol(["deletionVectors"]),
                _metadata_action(schema, conf),
                {"add": {**add, "stats": stats(4)}},
            ],
            [{"remove": removed}, {"add": {**add, "stats": stats(3), "deletionVector": _inline_dv([4])}}],
        ],
    )
    feed = dd.DeltaTable(str(table))
    for predicate in (None, "id = 4", "id > 3"):
        clear_cache()
        got = feed.changes(1, 1, predicate=predicate).to_table().select(["id", "_change_type"]).to_pylist()
        assert got == [{"id": 4, "_change_type": "delete"}], predicate
    ctx = SessionContext()
    dd.register(ctx)
    q = f"SELECT id, _change_type FROM table_changes('{table}', 0, 1) WHERE id >= 4 ORDER BY _commit_version"
    assert ctx.sql(q).to_arrow_table().to_pylist() == [
        {"id": 4, "_change_type": "insert"},
        {"id": 4, "_change_type": "delete"},
    ]


def test_change_feed_deleted_rows_outside_the_new_adds_wide_bounds(tmp_path: Path) -> None:
    """Wide bounds (``tightBounds: false``) bound the *valid* values of the logical file
    (PROTOCOL.md, Per-file Statistics): bounds tight to the rows still live are wide bounds too.
    The rows a new deletion vector deletes are not among them, so the re-added file's wide
    statistics say nothing of the change feed's delete rows: pruning by them dropped id 4."""
    from delta_datafusion.changes import clear_cache

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array(range(5), pa.int64())}), table / "part-0.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    conf = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}

    def stats(hi: int, tight: bool) -> str:
        bounds = {"minValues": {"id": 0}, "maxValues": {"id": hi}, "nullCount": {"id": 0}}
        return json.dumps({"numRecords": 5, **bounds, "tightBounds": tight})

    add = add_action(table, "part-0.parquet")
    removed = {**add, "deletionTimestamp": 1, "extendedFileMetadata": True}  # no stats, as Spark
    new = {**add, "stats": stats(3, False), "deletionVector": _inline_dv([4])}
    _write_log(
        table,
        [
            [
                _dv_protocol(["deletionVectors"]),
                _metadata_action(schema, conf),
                {"add": {**add, "stats": stats(4, True)}},
            ],
            [{"remove": removed}, {"add": new}],
        ],
    )
    for predicate in (None, "id = 4", "id > 3", "id >= 4 AND _change_type = 'delete'"):
        clear_cache()
        got = dd_changes(table, 1, predicate)
        assert got == [{"id": 4, "_change_type": "delete"}], predicate


def dd_changes(table: Path, start: int, predicate: str | None) -> list[dict[str, Any]]:
    import delta_datafusion as dd

    t = dd.DeltaTable(str(table)).changes(start, predicate=predicate).to_table()
    return t.select(["id", "_change_type"]).to_pylist()


@pytest.mark.parametrize(
    "empty",
    [
        {},
        {
            "storageType": None,
            "pathOrInlineDv": None,
            "offset": None,
            "sizeInBytes": None,
            "cardinality": None,
        },
    ],
    ids=["empty-object", "all-null-fields"],
)
def test_descriptor_without_fields_is_no_deletion_vector_everywhere(tmp_path: Path, empty: dict) -> None:
    """A deletionVector object with no field set is read as no deletion vector (every row of the
    file); log replay keyed it as a deletion vector all the same, so a later remove of the file
    (its key: the path alone) left it live, and the change feed read a remove with it paired with
    an add with a real vector as restoring every row the new vector keeps."""
    import delta_datafusion as dd

    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1, 2, 3], pa.int64())}), table / "part-0.parquet")
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    conf = {"delta.enableDeletionVectors": "true", "delta.enableChangeDataFeed": "true"}
    add = add_action(table, "part-0.parquet", stats=json.dumps({"numRecords": 3}))
    removed = {**add, "deletionTimestamp": 1, "extendedFileMetadata": True}
    _write_log(
        table,
        [
            [
                _dv_protocol(["deletionVectors"]),
                _metadata_action(schema, conf),
                {"add": {**add, "deletionVector": empty}},
            ],
            [
                {"remove": {**removed, "deletionVector": empty}},
                {"add": {**add, "deletionVector": _inline_dv([0])}},
            ],
            [
                {"remove": {**removed, "deletionVector": _inline_dv([0])}},
                {"add": {**add, "deletionVector": empty}},
            ],
            [{"remove": removed}],
        ],
    )
    dt = dd.DeltaTable(str(table))

    def ids(version: int) -> list[int]:
        return sorted(dt.snapshot(version).scan().to_table().column("id").to_pylist())

    assert [ids(v) for v in range(4)] == [[1, 2, 3], [2, 3], [1, 2, 3], []]
    feed = dt.changes(0, 3).to_table().select(["id", "_change_type", "_commit_version"]).to_pylist()
    got = sorted((r["_commit_version"], r["_change_type"], r["id"]) for r in feed)
    assert got == [
        (0, "insert", 1),
        (0, "insert", 2),
        (0, "insert", 3),
        (1, "delete", 1),
        (2, "insert", 1),
        (3, "delete", 1),
        (3, "delete", 2),
        (3, "delete", 3),
    ]
