"""Reads racing a writer's commits, checkpoints and log cleanup, made deterministic: the writer's
step runs at a chosen point of the read (a patched lookup). The stress harness that found these
(a deltalake writer process, reader threads) is outside the suite."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
from conftest import log_dir
from datafusion import SessionContext

import delta_datafusion as dd
from delta_datafusion.datafusion.session import DeltaSchemaProvider

NO_RETENTION = {"delta.logRetentionDuration": "interval 0 seconds"}


def _appends(t: Path, count: int) -> None:
    """Appends of one row each (``id`` = version), a checkpoint at version 1, no log retention."""
    for i in range(count):
        deltalake.write_deltalake(str(t), pa.table({"id": [i]}), mode="append", configuration=NO_RETENTION)
        if i == 1:
            deltalake.DeltaTable(str(t)).create_checkpoint()


def _commit_checkpoint_and_clean_up(t: Path, value: int) -> None:
    """The writer's next commit, a checkpoint at it and a log cleanup: every older commit and
    checkpoint is deleted, the versions before the new one can no longer be built from the log."""
    deltalake.write_deltalake(str(t), pa.table({"id": [value]}), mode="append")
    writer = deltalake.DeltaTable(str(t))
    writer.create_checkpoint()
    writer.cleanup_metadata()
    assert not (log_dir(t) / f"{value - 1:020d}.json").exists()


def test_a_cleanup_during_a_catalog_lookup_lists_again_to_the_new_latest_version(tmp_path, monkeypatch):
    """A folder-catalog lookup lists the log, pins the newest version (3) for the statement, then
    reads its commits: a writer's commit, checkpoint and log cleanup in between removed them. The
    lookup lists again, as it should, but the pin its failed attempt had left kept it on version
    3, which the log no longer holds: the query of the latest version failed with
    VersionNotFoundError ("version 3 ... cannot be reconstructed ... available versions are
    4..4"; found by the stress harness, seed 10, a UNION ALL of the table with itself). Only a
    lookup that succeeds pins: the retry reads version 4, the statement's other reference too."""
    t = tmp_path / "lake" / "t"
    _appends(t, 4)
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))

    listed = DeltaSchemaProvider._listing
    listings = []

    def writer_after_the_first_listing(self, name):
        found = listed(self, name)
        listings.append(found[1].latest_version())
        if len(listings) == 1:
            _commit_checkpoint_and_clean_up(t, 4)
        return found

    monkeypatch.setattr(DeltaSchemaProvider, "_listing", writer_after_the_first_listing)
    query = "SELECT id, 1 AS side FROM lake.default.t UNION ALL SELECT id, 2 FROM lake.default.t ORDER BY side, id"
    rows = ctx.sql(query).to_pydict()
    assert listings[:2] == [3, 4]
    assert rows == {"id": [0, 1, 2, 3, 4] * 2, "side": [1] * 5 + [2] * 5}


def test_a_cleanup_after_a_catalog_lookup_leaves_a_loaded_snapshot_readable(tmp_path, monkeypatch):
    """The catalog's cached snapshot of version 3 has read its log; a commit, checkpoint and log
    cleanup right after a statement's lookup removes version 3 from the log. The statement still
    reads version 3 whole on both sides of its self-join (its files are in memory, its data files
    still there), not a mix with version 4 or an error; the next statement reads version 4."""
    t = tmp_path / "lake" / "t"
    _appends(t, 4)
    ctx = SessionContext()
    dd.register_catalog(ctx, "lake", str(tmp_path / "lake"))
    assert ctx.sql("SELECT count(*) AS n FROM lake.default.t").to_pydict() == {"n": [4]}  # v3 loaded

    looked_up = DeltaSchemaProvider._table_once
    lookups = []

    def writer_after_the_lookup(self, name):
        provider = looked_up(self, name)
        lookups.append(name)
        if len(lookups) == 1:
            _commit_checkpoint_and_clean_up(t, 4)
        return provider

    monkeypatch.setattr(DeltaSchemaProvider, "_table_once", writer_after_the_lookup)
    query = "SELECT a.id AS a, b.id AS b FROM lake.default.t a FULL JOIN lake.default.t b ON a.id = b.id ORDER BY 1"
    assert ctx.sql(query).to_pydict() == {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    assert lookups == ["t"]
    assert ctx.sql(query).to_pydict() == {"a": [0, 1, 2, 3, 4], "b": [0, 1, 2, 3, 4]}
