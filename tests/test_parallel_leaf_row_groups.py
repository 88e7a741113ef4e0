"""Row groups named by a caller's LeafFile that the leaf does not have, or that are not row group
indexes: refused with a ParallelStateError naming the leaf and its row-group count (an index out
of range raised pyarrow's bare IndexError; True was read as row group 1)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from delta_datafusion import DeltaTable
from delta_datafusion.errors import ParallelStateError
from delta_datafusion.log.checkpoint import LeafFile
from delta_datafusion.parallel import Parallel, ParallelScanMetadata, expand_leaf, split_leaves


@pytest.fixture(scope="module")
def phase_two(tmp_path_factory: pytest.TempPathFactory) -> tuple[Parallel, int]:
    """A table of 6 files (deltalake) whose classic checkpoint (version 5) is written again with
    row groups of 2 rows: 4 row groups (protocol and metaData, then the adds)."""
    deltalake = pytest.importorskip("deltalake")
    root = tmp_path_factory.mktemp("leaf_rg") / "t"
    for k in range(6):
        deltalake.write_deltalake(str(root), pa.table({"id": pa.array([k], pa.int64())}), mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    checkpoint = root / "_delta_log" / f"{5:020d}.checkpoint.parquet"
    pq.write_table(pq.read_table(checkpoint), checkpoint, row_group_size=2)
    (root / "_delta_log" / "_last_checkpoint").unlink()
    phase = DeltaTable(str(root)).snapshot().scan().parallel_scan_metadata()
    assert sum(b.files.num_rows for b in phase) == 0
    after = phase.finish()
    assert isinstance(after, Parallel) and len(after.files) == 1
    return after, pq.ParquetFile(after.files[0].path).metadata.num_row_groups


def test_every_row_group_gives_the_files(phase_two: tuple[Parallel, int]) -> None:
    after, groups = phase_two
    assert groups == 4
    leaf = after.files[0]
    parts = [LeafFile(leaf.path, leaf.size, (g,)) for g in range(groups)]
    out = ParallelScanMetadata(after.state.to_bytes(), parts)
    assert sum(b.files.num_rows for b in out) == 6


@pytest.mark.parametrize("row_groups", [(4,), (99,), (-1,), (0, 1, 2, -1), (True,), ("0",), (1.0,)])
def test_row_groups_the_leaf_does_not_have_are_refused(phase_two: tuple[Parallel, int], row_groups) -> None:
    after, _ = phase_two
    leaf = LeafFile(after.files[0].path, after.files[0].size, row_groups)
    with pytest.raises(ParallelStateError, match=r"00000000000000000005\.checkpoint\.parquet.* 4 row groups"):
        list(ParallelScanMetadata(after.state.to_bytes(), [leaf]))
    with pytest.raises(ParallelStateError, match=r"00000000000000000005\.checkpoint\.parquet.* 4 row groups"):
        expand_leaf(leaf, storage=after.state.storage)
    with pytest.raises(ParallelStateError, match=r"00000000000000000005\.checkpoint\.parquet.* 4 row groups"):
        split_leaves([leaf], 2, after.state.storage, max_share=0.0)


@pytest.mark.parametrize(
    ("path", "size", "why"),
    [
        ("x.parquet", None, r"size None is not a byte count"),
        ("x.parquet", "120", r"size '120' is not a byte count"),
        ("x.parquet", True, r"size True is not a byte count"),
        ("x.parquet", -5, r"size -5 is not a byte count"),
        (None, 0, r"path None is not a string"),
    ],
)
def test_a_leaf_file_with_a_size_or_path_of_another_kind_is_refused(
    phase_two: tuple[Parallel, int], path, size, why: str
) -> None:
    """A caller's LeafFile is checked when built: a size of None or text made split_leaves fail with
    a bare TypeError ("'<=' not supported between instances of 'NoneType' and 'int'")."""
    after, _ = phase_two
    with pytest.raises(ParallelStateError, match=why):
        split_leaves([LeafFile(path, size)], 2, after.state.storage)
