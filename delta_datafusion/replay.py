"""Action reconciliation: the live file set, app transactions and domain metadata of a snapshot.

Vectorized with Arrow: file actions are keyed by (resolved path, deletion-vector unique id);
among commit actions the newest per key wins (sort + first-of-group), and checkpoint adds survive
unless their key appears in any commit action (``is_in``). No Python object per file.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .arrays import as_array
from .errors import DeltaError, LogCorruptError
from .log.actions import DV_TYPE, partition_values_type
from .partition_values import map_to_struct
from .storage import Storage
from .strings import any_contains, any_contains_byte, percent_decode, starts_with_byte

#: Columns of the flat, raw add table that replay produces (before typing stats/partitions).
RAW_ADD_FIELDS = [
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "stats",
    "stats_parsed",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
]


def child(struct: pa.Array | pa.ChunkedArray, name: str, typ: pa.DataType | None = None) -> pa.Array:
    """A struct child honouring parent nulls; nulls of ``typ`` when the child is absent."""
    struct = as_array(struct)
    if not pa.types.is_struct(struct.type) or struct.type.get_field_index(name) < 0:
        return pa.nulls(len(struct), typ or pa.null())
    out = pc.struct_field(struct, name)
    if typ is not None and out.type != typ:
        out = out.cast(typ)
    return out


def flatten_file_actions(
    actions: pa.Array | pa.ChunkedArray,
    physical_partition_columns: Sequence[str],
    versions: pa.Array | None = None,
    where: str = "the log",
) -> pa.Table:
    """add/remove/cdc struct column -> flat table of its non-null rows (RAW_ADD_FIELDS + version).

    ``where`` names the source (commit range or checkpoint) in the error for an action that is
    not a struct or has no path."""
    actions = as_array(actions)
    if not (pa.types.is_struct(actions.type) or pa.types.is_null(actions.type)):
        raise LogCorruptError(f"{where}: file actions are {actions.type}, not a struct with a path")
    valid = actions.is_valid()
    rows = valid_rows(actions, valid)
    n = len(rows)
    if n:
        paths = child(rows, "path")
        if not (pa.types.is_string(paths.type) or pa.types.is_large_string(paths.type)):
            raise LogCorruptError(f"{where}: file action paths are {paths.type}, not strings")
        if paths.null_count:
            at = ""
            if versions is not None:
                bad = versions.filter(valid).filter(paths.is_null())
                at = f" at version {bad[0].as_py()}"
            raise LogCorruptError(f"{where}: {paths.null_count} file action(s){at} without a path")
        try:  # JSON parsing does not check UTF-8; a bad path would fail later, far from its cause
            paths.validate(full=True)
        except pa.ArrowInvalid as e:
            raise LogCorruptError(f"{where}: a file action's path is not valid UTF-8 ({e})") from e
    pv_type = partition_values_type(physical_partition_columns)
    pv = child(rows, "partitionValues")
    if n and physical_partition_columns and not pa.types.is_null(pv.type):
        if not (pa.types.is_map(pv.type) or pa.types.is_struct(pv.type)):
            raise LogCorruptError(f"{where}: partitionValues are {pv.type}, not a map of strings")
    if pa.types.is_map(pv.type):
        pv = map_to_struct(pv, list(physical_partition_columns))
    elif pa.types.is_null(pv.type) or pv.type != pv_type:
        if pa.types.is_struct(pv.type):
            pv = (
                pa.StructArray.from_arrays(
                    [child(pv, c, pa.string()) for c in physical_partition_columns] or [],
                    fields=[pa.field(c, pa.string()) for c in physical_partition_columns],
                )
                if physical_partition_columns
                else pa.array([{}] * n, pa.struct([]))
            )
        else:
            pv = (
                pa.array([{}] * n, pv_type)
                if not physical_partition_columns
                else pa.StructArray.from_arrays(
                    [pa.nulls(n, pa.string()) for _ in physical_partition_columns],
                    fields=[pa.field(c, pa.string()) for c in physical_partition_columns],
                )
            )
    try:
        cols = _flat_columns(rows, pv, n)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as e:
        raise LogCorruptError(
            f"{where}: a file action field has the wrong type: {str(e).splitlines()[0]}"
        ) from e
    if versions is not None:
        cols["version"] = versions.filter(valid)
    return pa.table(cols)


def _flat_columns(rows: pa.Array, pv: pa.Array, n: int) -> dict[str, pa.Array]:
    cols = {
        "path": child(rows, "path", pa.string()),
        "partitionValues": pv,
        "size": child(rows, "size", pa.int64()),
        "modificationTime": child(rows, "modificationTime", pa.int64()),
        "dataChange": child(rows, "dataChange", pa.bool_()),
        "stats": child(rows, "stats", pa.string()),
        "deletionVector": _dv_column(child(rows, "deletionVector"), n),
        "baseRowId": child(rows, "baseRowId", pa.int64()),
        "defaultRowCommitVersion": child(rows, "defaultRowCommitVersion", pa.int64()),
    }
    if rows.type.get_field_index("stats_parsed") >= 0:
        cols["stats_parsed"] = child(rows, "stats_parsed")
    return cols


def valid_rows(actions: pa.Array, valid: pa.Array) -> pa.Array:
    """The non-null rows; a zero-copy slice when they are one run (a checkpoint's adds usually
    are), which spares copying every stats string (21k adds: 2.0 -> 0.02 ms)."""
    nulls = actions.null_count
    if nulls == 0:
        return actions
    if nulls == len(actions):
        return actions.slice(0, 0)
    mask = valid.to_numpy(zero_copy_only=False)
    first = int(mask.argmax())
    last = len(mask) - int(mask[::-1].argmax())
    if last - first == len(actions) - nulls:
        return actions.slice(first, last - first)
    return actions.filter(valid)


def _dv_column(dv: pa.Array, n: int) -> pa.Array:
    """The deletion vectors as DV_TYPE; a descriptor present with every field null or empty
    (``"deletionVector": {}`` in a commit, a checkpoint writer's all-null struct) is none. Scans
    read such a file whole (``scan_unit.dv_or_none``), but keyed as a file with a DV a later
    remove of its path without one missed it, and the removed file's rows came back."""
    if pa.types.is_null(dv.type) or dv.null_count == len(dv):
        # none at all (most tables: a checkpoint's all-null struct column): no field to look at
        # (its 5 fields and the struct rebuilt were ~10 compute calls of every query's replay)
        return pa.nulls(n, DV_TYPE)
    children = [child(dv, f.name, f.type) for f in DV_TYPE]
    absent = pc.invert(dv.is_valid())
    if dv.null_count < len(dv):  # as dv_or_none: an empty storageType and no other field is none
        bare = functools.reduce(pc.and_, [dv.is_valid(), *(c.is_null() for c in children[1:])])
        if pc.any(bare).as_py():  # only then are the storageType strings compared
            no_type = pc.equal(pc.fill_null(children[0], ""), "")
            absent = pc.or_(absent, pc.and_(bare, no_type))
    return pa.StructArray.from_arrays(children, fields=list(DV_TYPE), mask=absent)


# -- keys ----------------------------------------------------------------------------------


def decode_paths(paths: pa.Array) -> pa.Array:
    """URL-decode log paths: all at once on their bytes (:func:`~.strings.percent_decode`); when
    that gives bytes that are not UTF-8, the rows with a '%' as ``unquote`` decodes them (see
    :func:`_unquote_by_folder`)."""
    paths = as_array(paths)
    decoded = percent_decode(paths)
    if decoded is not None:
        return decoded
    has_pct = pc.fill_null(pc.match_substring(paths, "%"), False)
    if pc.all(has_pct).as_py():
        return _unquote_by_folder(paths)
    return pc.replace_with_mask(paths, has_pct, _unquote_by_folder(paths.filter(has_pct)))


def _unquote_by_folder(paths: pa.Array) -> pa.Array:
    """``unquote`` of each (non-null) path with its folder part decoded once per distinct folder:
    a timestamp partition puts a '%' in every path of a table (one by one: 2.2 s per 1,000,000
    paths). An escape cannot span a literal '/', so folder and file name decode apart."""
    split = pc.split_pattern(paths, "/", max_splits=1, reverse=True)  # [folder, name] or [name]
    flat = split.flatten()
    ends = split.offsets.to_numpy(zero_copy_only=False)
    ends = ends - ends[0]  # flatten() starts at the first offset
    has_folder = np.diff(ends) == 2
    name = flat.take(pa.array(ends[1:] - 1))
    in_name = pc.match_substring(name, "%")
    if pc.any(in_name).as_py():  # file names rarely hold a '%': those go one by one
        decoded = pa.array([unquote(v) for v in name.filter(in_name).to_pylist()], paths.type)
        name = pc.replace_with_mask(name, in_name, decoded)
    if not has_folder.any():
        return name
    codes = pc.dictionary_encode(flat.take(pa.array(ends[:-1], mask=~has_folder)))
    folders = pa.array([unquote(v) for v in codes.dictionary.to_pylist()], paths.type)
    joined = pc.binary_join_element_wise(folders.take(codes.indices), name, pa.scalar("/", paths.type))
    return pc.if_else(pa.array(has_folder), joined, name)


#: What may start an empty or a dot segment of a relative log path: '//', './' ('a/./b', '../x').
_ODD_SEGMENT = r"//|\./"


def resolve_paths(storage: Storage, decoded: pa.Array) -> pa.Array:
    """Decoded log paths -> full paths on the table's filesystem (relative ones joined to root)."""
    if len(decoded) == 0:
        return decoded
    if storage.url_quoted:  # a store named by URL: every path percent-encoded (rare: one by one)
        return pa.array([storage.resolve(p) for p in decoded.to_pylist()], pa.string())
    root = storage.root.rstrip("/") + "/"
    try:
        root_text = pa.scalar(root, pa.string())
    except UnicodeEncodeError as e:  # undecodable bytes Python kept as surrogates
        raise DeltaError(
            f"table location {root!r} is not UTF-8 text (a folder name with bytes that are not UTF-8, "
            "or a non-UTF-8 locale: run Python with PYTHONUTF8=1 or a UTF-8 locale)"
        ) from e
    # the root put before each path (a join with a scalar went through the generic element-wise
    # kernel: 125k paths 3.8 -> 1.1 ms)
    joined = pc.binary_replace_slice(decoded, 0, 0, root_text.as_py())
    absolute = starts_with_byte(decoded, ord("/"))
    if any_contains_byte(decoded, ord(":")):
        absolute |= pc.fill_null(pc.match_substring(decoded, ":"), False).to_numpy(zero_copy_only=False)
    if storage.names_keys and (any_contains(decoded, b"//") or any_contains(decoded, b"./")):
        # a key's empty or dot segments: Storage.resolve refuses or resolves them
        odd = pc.match_substring_regex(decoded, _ODD_SEGMENT)
        absolute |= pc.fill_null(odd, False).to_numpy(zero_copy_only=False)
    if not absolute.any():
        return joined
    # only the absolute paths go through Python (one among 1,000,000 sent them all: 0.71 s)
    mask = pa.array(absolute)
    resolved = pa.array([storage.resolve(p) for p in decoded.filter(mask).to_pylist()], joined.type)
    return pc.replace_with_mask(joined, mask, resolved)


def dv_unique_ids(dv: pa.Array) -> pa.Array:
    """Protocol unique id of each deletion vector ('' when the file has none)."""
    st = pc.fill_null(child(dv, "storageType", pa.string()), "")
    p = pc.fill_null(child(dv, "pathOrInlineDv", pa.string()), "")
    off = child(dv, "offset", pa.int32())
    off_s = pc.if_else(off.is_valid(), pc.binary_join_element_wise("@", off.cast(pa.string()), ""), "")
    return pc.binary_join_element_wise(st, p, pc.fill_null(off_s, ""), "")


def file_keys(locations: pa.Array, dv: pa.Array) -> pa.Array:
    # A file without a deletion vector is keyed by its location alone (and so needs no string
    # building when a table has no deletion vectors at all).
    if dv.null_count == len(dv):
        return locations
    with_dv = pc.binary_join_element_wise(locations, dv_unique_ids(dv), "\x00")
    return pc.if_else(dv.is_valid(), with_dv, locations)


# -- reconciliation ------------------------------------------------------------------------


def newest_per_key(adds: pa.Table, removes: pa.Table, where: str) -> tuple[pa.Table, pa.Array]:
    """Live adds among commit actions and the set of all keys the commits touched.

    An add and a remove of one key in one commit is refused (``where`` names the table): the
    protocol does not order a commit's actions, so the file would be live or not by whichever
    line a reader takes last (Spark the later line, the kernel the first seen)."""
    n_a, n_r = adds.num_rows, removes.num_rows
    # Concatenate the chunks (a list of ChunkedArrays would be converted through Python objects).
    keys = pa.chunked_array(
        adds.column("key").chunks + removes.column("key").chunks, pa.string()
    ).combine_chunks()
    versions = pa.chunked_array(
        adds.column("version").chunks + removes.column("version").chunks, pa.int64()
    ).combine_chunks()
    if n_a + n_r == 0:
        return adds, keys
    # Hash the keys once (dictionary encoding), then order integer codes with numpy.
    encoded = pc.dictionary_encode(keys)
    if n_r == 0 and len(encoded.dictionary) == n_a:
        return adds, keys  # every add is unique and nothing was removed
    codes = encoded.indices.to_numpy()
    vers = versions.fill_null(-1).to_numpy()
    is_add = np.zeros(n_a + n_r, dtype=np.int8)
    is_add[:n_a] = 1
    # Newest version first; within one version an add wins over a remove (re-add after remove).
    order = np.lexsort((-is_add, -vers, codes))
    sorted_codes = codes[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = sorted_codes[1:] != sorted_codes[:-1]
    if n_r:
        _refuse_add_and_remove(order, first, vers, n_a, adds, where)
    winners = order[first]
    live_add_rows = np.sort(winners[winners < n_a])
    return adds.take(pa.array(live_add_rows)), keys


def _refuse_add_and_remove(
    order: np.ndarray, first: np.ndarray, vers: np.ndarray, n_a: int, adds: pa.Table, where: str
) -> None:
    """Raise if a key's newest action is an add with a remove of that key in the same version
    (``order`` puts a key's actions newest first, an add before a remove of its version)."""
    # a key's second action, where its first (the newest) is an add of the same version
    clash = ~first[1:] & (order[:-1] < n_a) & (order[1:] >= n_a) & (vers[order[:-1]] == vers[order[1:]])
    if not clash.any():
        return
    row = int(order[:-1][clash][0])
    version = int(vers[row])
    path = adds.column("path")[row].as_py()
    raise LogCorruptError(
        f"{where}: commit {version:020d}.json (version {version}) has file {path!r} both added "
        "and removed (with the same deletion vector); the protocol leaves such a commit's result "
        "undefined"
    )


def surviving_checkpoint_adds(adds: pa.Table, commit_keys: pa.Array) -> pa.Table:
    """Checkpoint adds whose key no commit after the checkpoint touched."""
    if adds.num_rows == 0 or len(commit_keys) == 0:
        return adds
    touched = pc.is_in(adds.column("key"), value_set=commit_keys)
    return adds.filter(pc.invert(touched))


def latest_txns(tables: Sequence[pa.Array]) -> dict[str, int]:
    """App transaction versions; ``tables`` are txn struct columns from newest to oldest."""
    out: dict[str, int] = {}
    for col in tables:
        col = as_array(col)
        col = col.filter(col.is_valid())
        for app, ver in zip(child(col, "appId").to_pylist(), child(col, "version").to_pylist(), strict=True):
            if app is not None and app not in out:
                out[app] = ver
    return out


def latest_domains(tables: Sequence[pa.Array]) -> dict[str, str]:
    """Active domain metadata; ``tables`` from newest to oldest; removed domains dropped."""
    seen: dict[str, str | None] = {}
    for col in tables:
        col = as_array(col)
        col = col.filter(col.is_valid())
        for d, conf, removed in zip(
            child(col, "domain").to_pylist(),
            child(col, "configuration").to_pylist(),
            child(col, "removed").to_pylist(),
            strict=True,
        ):
            if d is not None and d not in seen:
                seen[d] = None if removed else conf
    return {k: v for k, v in seen.items() if v is not None}


def with_locations(storage: Storage, table: pa.Table) -> pa.Table:
    """Decode the paths of a flat file-action table and add ``location`` (resolved, decoded path)."""
    decoded = decode_paths(table.column("path"))
    loc = resolve_paths(storage, decoded)
    table = table.set_column(table.schema.get_field_index("path"), "path", decoded)
    return table.append_column("location", loc)


def with_keys(storage: Storage, table: pa.Table) -> pa.Table:
    """Add ``location`` (resolved, decoded path) and ``key`` columns to a flat file-action table."""
    table = with_locations(storage, table)
    loc = as_array(table.column("location"))
    return table.append_column("key", file_keys(loc, as_array(table.column("deletionVector"))))


def touched_files(locations: pa.Array, dv: pa.Array, commit_keys: pa.Array) -> pa.Array:
    """Which files' keys are among ``commit_keys``: ``is_in(file_keys(locations, dv), commit_keys)``
    with the joined key built only for the files that have a deletion vector. A file without one
    is keyed by its location alone, and a checkpoint leaf's adds mostly have none (125k adds, a
    tenth with a DV: keys for all of them took ~20 ms, a string copy of every location)."""
    with_dv = len(dv) - dv.null_count
    if with_dv == 0:
        return pc.is_in(locations, value_set=commit_keys)
    if with_dv == len(dv):
        return pc.is_in(file_keys(locations, dv), value_set=commit_keys)
    has_dv = dv.is_valid()
    keyed = file_keys(locations.filter(has_dv), dv.filter(has_dv))
    plain = pc.is_in(locations, value_set=commit_keys)
    return pc.replace_with_mask(plain, has_dv, pc.is_in(keyed, value_set=commit_keys))
