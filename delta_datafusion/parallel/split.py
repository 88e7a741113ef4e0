"""Which leaf files (or row groups of them) each worker of the parallel phase reads.

Leaves are independent, so any partition of them is correct; this module makes balanced ones,
splitting a large leaf into row-group ranges, and refuses file lists that would yield a leaf's
files twice.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..arguments import integer
from ..errors import ArgumentError, ParallelStateError, StorageError
from ..log.actions import checkpoint_read_errors
from ..log.checkpoint import LEAF_WHAT, LeafFile, check_row_groups, open_leaf
from ..storage import Storage, normalized_path


def leaf_location(storage: Storage, path: str) -> str:
    """A leaf path resolved against the table and normalized (no '..' escaping the log folder).

    The sequential phase hands out leaves as store paths, which on object stores have no leading
    '/' (``bucket/t/_delta_log/...``): read as relative, they would be joined to the root again.
    On a store that names files by URL they are URLs already percent-encoded: resolved as a log
    path, they would be encoded again."""
    if ("://" not in path or storage.url_quoted) and path.startswith(storage.root.rstrip("/") + "/"):
        return normalized_path(path)
    return normalized_path(storage.resolve(path))


def refuse_overlaps(files: Sequence[LeafFile], storage: Storage) -> None:
    """The same leaf (or row group) twice would yield its files twice."""
    seen: dict[str, set[int] | None] = {}
    for f in files:
        where = leaf_location(storage, f.path)
        groups = None if f.row_groups is None else set(f.row_groups)
        if groups is not None and len(groups) != len(f.row_groups):
            raise ParallelStateError(f"leaf file {f.path} lists a row group twice: {list(f.row_groups)}")
        if where in seen:
            before = seen[where]
            if before is None or groups is None or before & groups:
                raise ParallelStateError(
                    f"leaf file {f.path} is given twice (overlapping row groups): each leaf, or each row "
                    "group of it, must be in exactly one split"
                )
            before |= groups
        else:
            seen[where] = groups


def as_leaf(f: LeafFile | str) -> LeafFile:
    if isinstance(f, LeafFile):
        return f
    if isinstance(f, str):
        return LeafFile(f)
    raise ParallelStateError(f"expected a LeafFile or a path, got {type(f).__qualname__}")


def _local_storage() -> Storage:
    return Storage("/")


def _row_group_weights(leaf: LeafFile, storage: Storage) -> list[tuple[int, int]]:
    """(row-group index, uncompressed bytes) of the row groups a leaf covers."""
    storage.note_sizes(((leaf.path, leaf.size),))  # opened at the logged size (see read_leaf)
    with checkpoint_read_errors(leaf.path, LEAF_WHAT, storage), open_leaf(storage, leaf.path) as pf:
        md = pf.metadata
    check_row_groups(leaf, md.num_row_groups)
    groups = range(md.num_row_groups) if leaf.row_groups is None else leaf.row_groups
    return [(i, max(1, md.row_group(i).total_byte_size)) for i in groups]


def _linear_partition(weights: Sequence[float], parts: int) -> list[int]:
    """Group index of each item, contiguous groups balanced by cumulative weight."""
    total = float(sum(weights)) or 1.0
    out, acc = [], 0.0
    for w in weights:
        mid = acc + w / 2.0
        out.append(min(parts - 1, int(mid * parts / total)))
        acc += w
    return out


def _merge(leaf: LeafFile, indices: list[int], all_groups: int | None) -> LeafFile:
    if leaf.row_groups is None and all_groups is not None and indices == list(range(all_groups)):
        return leaf
    return LeafFile(leaf.path, leaf.size, tuple(indices))


def expand_leaf(leaf: LeafFile, chunks: int | None = None, storage: Storage | None = None) -> list[LeafFile]:
    """Split one leaf into row-group ranges: one per row group, or ``chunks`` balanced contiguous ones.

    Reads only the parquet footer. The ranges partition the leaf's rows exactly.
    """
    storage = storage or _local_storage()
    rgs = _row_group_weights(leaf, storage)
    if not rgs:
        return [leaf]
    if chunks is None or chunks >= len(rgs):
        return [LeafFile(leaf.path, leaf.size, (i,)) for i, _ in rgs]
    assign = _linear_partition([w for _, w in rgs], max(1, chunks))
    out: dict[int, list[int]] = {}
    for (i, _), g in zip(rgs, assign, strict=True):
        out.setdefault(g, []).append(i)
    return [LeafFile(leaf.path, leaf.size, tuple(v)) for _, v in sorted(out.items())]


def split_leaves(
    files: Sequence[LeafFile], parts: int, storage: Storage | None = None, *, max_share: float = 0.5
) -> list[list[LeafFile]]:
    """Partition leaf files into at most ``parts`` non-empty, balanced, contiguous groups.

    Files are weighted by size. A file bigger than ``max_share`` of one group's fair share (or of
    unknown size, when it may need it) is split into its row groups, weighted by their uncompressed
    size scaled to the file's size; a group receiving several row groups of a file gets one
    ``LeafFile`` with those row groups (the whole file when it got all of them). Reads parquet
    footers only for the files it splits. Every row of every file lands in exactly one group.
    """
    files = [as_leaf(f) for f in files]
    parts = integer(parts, "parts")
    if parts < 1:
        raise ArgumentError(f"parts must be at least 1, got {parts}")
    if not files:
        return []
    storage = storage or _local_storage()
    refuse_overlaps(files, storage)
    if parts == 1:
        return [list(files)]
    sizes = []
    for f in files:
        size = f.size
        if size <= 0:
            try:
                size = storage.info(f.path).size or 1  # None: a store that does not tell
            except (OSError, StorageError):  # only a weight for balancing: the read reports it
                size = 1
        sizes.append(max(1, size))
    fair = sum(sizes) / parts
    # units: (file index, row-group index or None, weight)
    units: list[tuple[int, int | None, float]] = []
    n_groups: dict[int, int] = {}
    for i, (f, size) in enumerate(zip(files, sizes, strict=True)):
        if size > max_share * fair:
            rgs = _row_group_weights(f, storage)
            if len(rgs) > 1:
                n_groups[i] = len(rgs)
                rg_total = float(sum(w for _, w in rgs))
                units.extend((i, rg, size * w / rg_total) for rg, w in rgs)
                continue
        units.append((i, None, float(size)))
    assign = _linear_partition([w for _, _, w in units], parts)
    groups: dict[int, dict[int, list[int] | None]] = {}
    for (i, rg, _), g in zip(units, assign, strict=True):
        per_file = groups.setdefault(g, {})
        if rg is None:
            per_file[i] = None
        else:
            lst = per_file.setdefault(i, [])
            assert lst is not None
            lst.append(rg)
    out = []
    for g in sorted(groups):
        leaves = []
        for i, rgs in groups[g].items():
            f = files[i]
            leaves.append(f if rgs is None else _merge(f, rgs, n_groups[i]))
        out.append(leaves)
    return out
