"""Version checksum files (``_delta_log/NNN.crc``, written by Spark beside every commit).

They carry the protocol and metadata at their version, so ``history(limit=k)`` and
``timeline()`` need not read back through the log to find them. They are hints: one that is
missing, unreadable, malformed or not taken by this reader leaves the answer (and any error) as
the log gives it, and no listing decision (versions, gaps, checkpoints) depends on them.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
from conftest import CORPUS, copy_table, corpus_table, log_dir, manifest_tables, one_row_appends, write_commit

import delta_datafusion as dd
from delta_datafusion.log.segment import build_segment
from delta_datafusion.snapshot import latest_protocol_metadata
from delta_datafusion.storage import Storage

deltalake = pytest.importorskip("deltalake")


def _crc_path(table: Path, version: int) -> Path:
    return log_dir(table) / f"{version:020d}.crc"


def _log_protocol_metadata(table: Path, version: int) -> tuple[dict, dict]:
    """The newest protocol and metaData actions of commits 0..version (no checkpoint)."""
    protocol = metadata = None
    for v in range(version + 1):
        for line in (log_dir(table) / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line)
            protocol = action.get("protocol", protocol)
            metadata = action.get("metaData", metadata)
    return protocol, metadata


def _write_crc(table: Path, version: int, **override) -> Path:
    """A checksum file of ``version`` as Spark writes it (the fields this reader uses true)."""
    protocol, metadata = _log_protocol_metadata(table, version)
    crc = {"txnId": "t", "tableSizeBytes": 0, "numFiles": 0, "numMetadata": 1, "numProtocol": 1}
    crc |= {"protocol": protocol, "metadata": metadata} | override
    path = _crc_path(table, version)
    path.write_text(json.dumps(crc))
    return path


def _appends(path: Path, n: int) -> Path:
    """``n`` one-row appends by deltalake: protocol and metaData in commit 0 only, no checkpoint."""
    return one_row_appends(path, n)


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """Log files read through the storage layer, by name."""
    counted: Counter = Counter()
    real = Storage.read_bytes

    def read_bytes(self, path, size=None):
        counted[path.rsplit("/", 1)[-1]] += 1
        return real(self, path, size)

    monkeypatch.setattr(Storage, "read_bytes", read_bytes)
    return counted


def _commits_read(reads: Counter) -> set[int]:
    return {int(name[:20]) for name in reads if name.endswith(".json")}


def test_history_with_a_limit_reads_the_checksum_not_the_log_back_to_commit_0(tmp_path: Path, reads) -> None:
    """On a log whose protocol and metaData are only in commit 0, with no checkpoint, the latest
    ones were found by reading every commit; the checksum of the latest version gives them."""
    table = _appends(tmp_path / "t", 30)
    full = dd.DeltaTable(str(table)).history()
    _write_crc(table, 29)
    reads.clear()
    assert dd.DeltaTable(str(table)).history(limit=3) == full.slice(27)
    assert _commits_read(reads) == {27, 28, 29}, sorted(_commits_read(reads))
    assert reads[f"{29:020d}.crc"] == 1
    reads.clear()
    timeline = dd.DeltaTable(str(table)).timeline()
    assert [timeline.timestamp(v) for v in range(30)] == full.column("timestamp").to_pylist()
    assert _commits_read(reads) == set()  # file times come with the listing


def test_an_older_checksum_ends_the_search_after_the_commits_since(tmp_path: Path, reads) -> None:
    """Commits made after the newest checksum (by a writer that writes none) are read first; a
    protocol or metaData among them wins over the checksum's, which gives the other."""
    table = _appends(tmp_path / "t", 12)
    _, metadata = _log_protocol_metadata(table, 11)
    write_commit(table, 12, [{"commitInfo": {"operation": "UPGRADE PROTOCOL"}}, {"protocol": _ICT_PROTOCOL}])
    for v in range(13, 20):
        write_commit(table, v, [{"commitInfo": {"operation": "WRITE"}}])
        if v == 14:
            _write_crc(table, 14)
    reads.clear()
    assert dd.DeltaTable(str(table)).history(limit=2).column("version").to_pylist() == [18, 19]
    assert _commits_read(reads) == set(range(15, 20))
    # in-commit timestamps enabled at 20 (the checksum's protocol has the feature): used
    ict = 1_900_000_000_000
    config = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "20"}
    config["delta.inCommitTimestampEnablementTimestamp"] = str(ict)
    write_commit(
        table,
        20,
        [
            {"commitInfo": {"timestamp": 1, "inCommitTimestamp": ict, "operation": "SET TBLPROPERTIES"}},
            {"metaData": dict(metadata, configuration=config)},
        ],
    )
    reads.clear()
    latest = dd.DeltaTable(str(table)).history(limit=1).to_pylist()
    info = {"timestamp": 1, "inCommitTimestamp": ict, "operation": "SET TBLPROPERTIES"}
    assert [dict(h, commit_info=json.loads(h["commit_info"])) for h in latest] == [
        {"version": 20, "timestamp": ict, "operation": "SET TBLPROPERTIES", "commit_info": info}
    ]
    assert _commits_read(reads) == set(range(15, 21))


def test_a_checksum_older_than_the_checkpoint_is_not_read(tmp_path: Path, reads) -> None:
    table = _appends(tmp_path / "t", 12)
    _write_crc(table, 5)
    deltalake.DeltaTable(str(table)).create_checkpoint()  # at 11
    _appends(table, 2)
    reads.clear()
    assert dd.DeltaTable(str(table)).history(limit=1).column("version").to_pylist() == [13]
    assert not [n for n in reads if n.endswith(".crc")]
    assert _commits_read(reads) == {12, 13}


#: a protocol that allows in-commit timestamps
_ICT_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["inCommitTimestamp"]}


def _unreadable_protocol(table: Path, version: int) -> dict:
    protocol, _ = _log_protocol_metadata(table, version)
    return {"protocol": dict(protocol, minReaderVersion=3, readerFeatures=["noSuchFeature"])}


def _metadata_with(table: Path, version: int, **fields) -> dict:
    _, metadata = _log_protocol_metadata(table, version)
    return {"metadata": dict(metadata, **fields)}


@pytest.mark.parametrize(
    "damage",
    [
        "empty",
        "truncated",
        "not json",
        "not utf-8",
        "a list",
        "no protocol",
        "no metadata",
        "protocol not an object",
        "protocol unreadable",
        "metadata schema not json",
        "metadata ict after its version",
        "a folder",
        "removed after listing",
    ],
)
def test_a_checksum_that_cannot_be_used_leaves_history_as_the_log_gives_it(
    tmp_path: Path, reads, damage: str, monkeypatch
) -> None:
    table = _appends(tmp_path / "t", 8)
    expected = {k: dd.DeltaTable(str(table)).history(limit=k) for k in (None, 1, 3)}
    expected_timeline = dd.DeltaTable(str(table)).timeline()
    crc = _write_crc(table, 7)
    text = crc.read_text()
    ict = {"delta.enableInCommitTimestamps": "true", "delta.inCommitTimestampEnablementVersion": "9"}
    ict |= {"delta.inCommitTimestampEnablementTimestamp": "1"}
    edits = {
        "empty": lambda: crc.write_text(""),
        "truncated": lambda: crc.write_text(text[: len(text) // 2]),
        "not json": lambda: crc.write_text("checksum"),
        "not utf-8": lambda: crc.write_bytes(b'{"protocol": "\xff\xfe"}'),
        "a list": lambda: crc.write_text("[]"),
        "no protocol": lambda: _write_crc(table, 7, protocol=None),
        "no metadata": lambda: crc.write_text(
            json.dumps({k: v for k, v in json.loads(text).items() if k != "metadata"})
        ),
        "protocol not an object": lambda: _write_crc(table, 7, protocol="1,2"),
        "protocol unreadable": lambda: _write_crc(table, 7, **_unreadable_protocol(table, 7)),
        "metadata schema not json": lambda: _write_crc(
            table, 7, **_metadata_with(table, 7, schemaString="{")
        ),
        "metadata ict after its version": lambda: _write_crc(
            table, 7, protocol=_ICT_PROTOCOL, **_metadata_with(table, 7, configuration=ict)
        ),
        "a folder": lambda: (crc.unlink(), crc.mkdir()),
        "removed after listing": lambda: None,
    }
    edits[damage]()
    if damage == "removed after listing":
        real = dd.DeltaTable.listing

        def listing_then_remove(self):
            listed = real(self)
            crc.unlink(missing_ok=True)
            return listed

        monkeypatch.setattr(dd.DeltaTable, "listing", listing_then_remove)
    reads.clear()
    for k, history in expected.items():
        assert dd.DeltaTable(str(table)).history(limit=k) == history
    timeline = dd.DeltaTable(str(table)).timeline()
    assert timeline.ict == expected_timeline.ict
    assert [timeline.timestamp(v) for v in range(8)] == [expected_timeline.timestamp(v) for v in range(8)]
    assert 0 in _commits_read(reads)  # the log was read back to commit 0


def test_a_log_error_is_the_same_with_a_checksum_beside_it(tmp_path: Path) -> None:
    """The newest commit's protocol cannot be read: the error names it, checksum or not (the
    checksum's metadata is taken, then the commit's protocol refused: the log decides)."""
    table = _appends(tmp_path / "t", 4)
    protocol, _ = _log_protocol_metadata(table, 3)
    write_commit(
        table, 4, [{"protocol": dict(protocol, minReaderVersion=3, readerFeatures=["noSuchFeature"])}]
    )
    errors = []
    for crc in (False, True):
        if crc:
            _write_crc(table, 3)
        with pytest.raises(dd.errors.UnsupportedFeatureError) as info:
            dd.DeltaTable(str(table)).history(limit=1)
        errors.append(str(info.value))
    assert errors[0] == errors[1] and f"{4:020d}.json" in errors[0]


def test_checksum_names_do_not_make_versions_gaps_or_tables(tmp_path: Path) -> None:
    """A checksum is never a version: one beyond the latest commit, one whose commit is missing,
    one with a version no log can hold, or a log of checksums alone."""
    table = _appends(tmp_path / "t", 6)
    before = dd.DeltaTable(str(table)).history()
    _write_crc(table, 5)
    shutil.copy(_crc_path(table, 5), _crc_path(table, 9))  # no commit 9 (or 6-8)
    (log_dir(table) / ("9" * 20 + ".crc")).write_text("{}")
    (log_dir(table) / f".{5:020d}.crc.crc").write_text("hadoop checksum")
    t = dd.DeltaTable(str(table))
    assert t.latest_version() == 5 and t.snapshot().version == 5
    assert t.history() == before and t.history(limit=2) == before.slice(4)
    with pytest.raises(dd.errors.VersionNotFoundError):
        t.snapshot(9)
    # a commit missing below the latest is still a gap, a checksum of it or not
    shutil.copy(_crc_path(table, 5), _crc_path(table, 3))
    (log_dir(table) / f"{3:020d}.json").unlink()
    with pytest.raises(dd.errors.NonContiguousVersionsError, match="missing 3 between 0 and 5"):
        t.snapshot()
    only = tmp_path / "only"
    (only / "_delta_log").mkdir(parents=True)
    shutil.copy(_crc_path(table, 5), _crc_path(only, 0))
    with pytest.raises(dd.errors.TableNotFoundError, match="holds no commit or checkpoint files"):
        dd.DeltaTable(str(only)).history()


def _corpus_tables_with_checksums() -> list[str]:
    """Corpus tables with version checksum files (none when the corpus is absent)."""
    names = []
    for t in manifest_tables():
        log = CORPUS / "tables" / t["name"] / "_delta_log"
        if any(len(p.name) == 24 and p.name[:20].isdigit() for p in log.glob("*.crc")):
            names.append(t["name"])
    return names


@pytest.mark.parametrize("name", _corpus_tables_with_checksums())
def test_corpus_checksums_give_what_the_log_gives(tmp_path: Path, name: str) -> None:
    """Every Spark checksum of the corpus: its protocol and metadata are those the log replay
    finds at its version, and history and timestamps are the same with the checksums hidden."""
    from delta_datafusion.log.checksum import checksum_for

    table = copy_table(corpus_table(name), tmp_path / name)
    with_crc = dd.DeltaTable(str(table))
    listing = with_crc.listing()
    assert listing.checksums
    for version in sorted(listing.checksums):
        segment = build_segment(listing, version)
        checksum = checksum_for(listing, segment)
        assert checksum is not None and checksum.version == version
        snap = with_crc.snapshot(version)
        # nothing but the checksum to search: what is found is the checksum's
        alone = dataclasses.replace(segment, checkpoint=None, commits=())
        proto, md, _ = latest_protocol_metadata(with_crc.storage, alone, [], checksum)
        assert proto == snap.protocol, version
        assert md.id == snap.metadata.id and md.configuration == snap.metadata.configuration, version
        assert md.arrow_schema.equals(snap.metadata.arrow_schema, check_metadata=True), version
        assert md.physical_schema.equals(snap.metadata.physical_schema, check_metadata=True), version
        assert md.partition_columns == snap.metadata.partition_columns, version
    results = {}
    for hidden in (False, True):
        if hidden:
            for crc in log_dir(table).glob("*.crc"):
                crc.unlink()
        t = dd.DeltaTable(str(table))
        timeline = t.timeline()
        results[hidden] = (
            [t.history(limit=k) for k in (None, 1, 2, 5)],
            timeline.ict,
            [timeline.timestamp(v) for v in timeline.versions],
        )
    assert results[False] == results[True]
