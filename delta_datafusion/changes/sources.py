"""The change-source table: one row per file (or deletion-vector difference) a range's commits
contribute, built from their flat file actions. Planning prunes and reads this table, so how
it is assembled (cdc files, adds, removes, re-adds with a new deletion vector) lives here,
separate from the pruning."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..arrays import as_array
from ..log.actions import DV_TYPE, commit_schema, partition_values_type
from ..replay import file_keys

#: Source kinds in the change-source table.
KIND_CDC, KIND_ADD, KIND_REMOVE, KIND_DV_UPDATE = "cdc", "add", "remove", "dv_update"


#: Columns of :attr:`ChangeFeed.sources` (and :meth:`ChangeScan.files`), in order.
SOURCE_COLUMNS = [
    "kind",
    "change_type",
    "version",
    "timestamp",
    "path",
    "location",
    "size",
    "partition_values",
    "stats",
    "deletion_vector",
    "only_rows",
    "drop_rows",
]


def with_add_stats(removes: pa.Table, adds: pa.Table) -> pa.Table:
    """Removes without statistics (deltalake writes them so) take those of an add in the range
    of the same file with the same deletion vector: the rows the remove deletes are the rows
    live in that add, which its statistics describe (tight bounds with a deletion vector are
    tight to exactly those rows). ``count(*)`` then needs no open of the removed file, which may
    be vacuumed, and filters can prune it."""
    if removes.num_rows == 0 or adds.num_rows == 0:
        return removes
    stats = removes.column("stats").combine_chunks()
    if stats.null_count == 0:
        return removes
    known = adds.filter(adds.column("stats").is_valid())
    if known.num_rows == 0:
        return removes

    def keys(t: pa.Table) -> pa.Array:
        return file_keys(t.column("location").combine_chunks(), t.column("deletionVector").combine_chunks())

    at = pc.index_in(keys(removes), value_set=keys(known))
    inherited = pc.coalesce(stats, known.column("stats").combine_chunks().take(at))
    return removes.set_column(removes.schema.get_field_index("stats"), "stats", inherited)


def merged_partition_values(
    pv: pa.StructArray, parts: list[str], aliases: dict[str, list[str]]
) -> pa.StructArray:
    """``pv`` read with the aliases' keys too -> one child per partition column (its own key
    first). A null map stays null (it is refused later)."""
    children = []
    for p in parts:
        values = pv.field(p)
        if p in aliases:
            values = pc.coalesce(values, *(pv.field(a) for a in aliases[p]))
        children.append(values)
    mask = pc.invert(pv.is_valid()) if pv.null_count else None
    return pa.StructArray.from_arrays(children, names=parts, mask=mask)


def changes_commit_schema(pv: pa.DataType) -> pa.Schema:
    """The commit schema with ``remove.stats`` (removes may carry stats; used for skipping)."""
    base = commit_schema(pv)
    fields = []
    for f in base:
        if f.name == "remove" and f.type.get_field_index("stats") < 0:
            f = pa.field("remove", pa.struct(list(f.type) + [pa.field("stats", pa.string())]))
        fields.append(f)
    return pa.schema(fields)


def once_per_commit(actions: pa.Table) -> pa.Table:
    """File actions with one row per (version, file, deletion vector): a commit listing the same
    action twice changes the file once (as replay has it), not twice."""
    n = actions.num_rows
    if n < 2:
        return actions
    dv = (
        actions.column("deletionVector").combine_chunks()
        if "deletionVector" in actions.column_names
        else None
    )
    locations = actions.column("location").combine_chunks()
    keys = locations if dv is None else file_keys(locations, dv)
    rows = pa.table({"v": actions.column("version"), "k": keys, "i": pa.array(np.arange(n, dtype=np.int64))})
    last = rows.group_by(["v", "k"], use_threads=False).aggregate([("i", "max")]).column("i_max")
    if len(last) == n:
        return actions
    return actions.take(pa.array(np.sort(last.to_numpy())))


def pair_key(t: pa.Table) -> pa.Array:
    if t.num_rows == 0:
        return pa.array([], pa.string())
    return pc.binary_join_element_wise(
        t.column("version").combine_chunks().cast(pa.string()), t.column("location").combine_chunks(), "\x00"
    )


def _dv_ids(dv: pa.Array) -> pa.Array:
    st = pc.struct_field(dv, "storageType")
    p = pc.struct_field(dv, "pathOrInlineDv")
    off = pc.fill_null(pc.struct_field(dv, "offset").cast(pa.string()), "")
    return pc.binary_join_element_wise(st, p, off, "@")


def _as_dv(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None:
        return pa.nulls(n, DV_TYPE)
    arr = as_array(arr)
    if arr.type != DV_TYPE:
        arr = arr.cast(DV_TYPE)
    return arr


_ORDER = {KIND_CDC: 0, KIND_REMOVE: 1, KIND_DV_UPDATE: 2, KIND_ADD: 3}


def dv_update_pieces(readds: pa.Table, removes: pa.Table, rem_pk: pa.Array) -> list[pa.Table]:
    """Sources for files removed and added again in one commit with another deletion vector:
    rows in the new vector and not the old are deleted; rows in the old and not the new are
    inserted again (restored). ``readds``: the adds that pair with one of ``removes``."""
    idx = pc.index_in(pair_key(readds), value_set=rem_pk)
    old_dv = removes.column("deletionVector").combine_chunks().take(idx)
    new_dv = readds.column("deletionVector").combine_chunks()
    same = pc.fill_null(pc.equal(_dv_ids(old_dv), _dv_ids(new_dv)), False)
    pieces = []
    # (change type, the vector whose rows are read, the vector whose rows are left out, the
    # statistics that bound those rows)
    for change, only, drop, stats in (
        ("delete", new_dv, old_dv, _stats_of_newly_deleted(removes, idx)),
        ("insert", old_dv, new_dv, None),
    ):
        selected = pc.and_(only.is_valid(), pc.invert(same))
        if pc.any(selected).as_py():
            rows = readds.filter(selected)
            if stats is not None:
                rows = rows.set_column(rows.schema.get_field_index("stats"), "stats", stats.filter(selected))
            pieces.append(piece(rows, KIND_DV_UPDATE, change, only.filter(selected), drop.filter(selected)))
    return pieces


def _stats_of_newly_deleted(removes: pa.Table, idx: pa.Array) -> pa.Array:
    """Statistics bounding the rows a new deletion vector deletes: the remove's, which describe
    the rows live before (those rows among them), or none (no pruning by the log; planning then
    reads the file's footer). The new add's never do: tight bounds describe only the rows still
    live, and wide ones (``tightBounds: false``) bound only those too (PROTOCOL.md: "<= all valid
    values"), which bounds tight to the live rows satisfy."""
    return removes.column("stats").combine_chunks().cast(pa.string()).take(idx)


def piece(
    t: pa.Table,
    kind: str,
    change_type: str | None,
    only: pa.Array | None,
    drop: pa.Array | None,
    with_stats: bool = True,
) -> pa.Table:
    n = t.num_rows
    stats = t.column("stats") if (with_stats and "stats" in t.column_names) else pa.nulls(n, pa.string())
    return pa.table(
        {
            "kind": pa.array([kind] * n, pa.string()),
            "order": pa.array(np.full(n, _ORDER[kind], dtype=np.int8)),
            "change_type": pa.array([change_type] * n, pa.string()),
            "version": t.column("version"),
            "path": t.column("path"),
            "location": t.column("location"),
            "size": t.column("size"),
            "partitionValues": t.column("partitionValues"),
            "stats": stats.cast(pa.string()),
            "deletionVector": _as_dv(t.column("deletionVector"), n),
            "only_rows": _as_dv(only, n),
            "drop_rows": _as_dv(drop, n),
        }
    )


def empty_raw_sources(parts: list[str]) -> pa.Table:
    return pa.table(
        {
            "kind": pa.array([], pa.string()),
            "order": pa.array([], pa.int8()),
            "change_type": pa.array([], pa.string()),
            "version": pa.array([], pa.int64()),
            "path": pa.array([], pa.string()),
            "location": pa.array([], pa.string()),
            "size": pa.array([], pa.int64()),
            "partitionValues": pa.array([], partition_values_type(parts)),
            "stats": pa.array([], pa.string()),
            "deletionVector": pa.array([], DV_TYPE),
            "only_rows": pa.array([], DV_TYPE),
            "drop_rows": pa.array([], DV_TYPE),
        }
    )
