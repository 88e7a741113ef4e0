"""Shared test helpers: the conformance corpus, table copies, live row counts, folder states.

The corpus (``../shared/corpus`` next to the repository) holds real Delta tables and the results a
correct reader must produce (see its README.md). Tests that need it skip with a message naming the
path when it is absent.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import settings

# Property tests are reproducible by default (CI must not depend on a random seed);
# HYPOTHESIS_PROFILE=explore draws new examples on every run.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # the package is used from the checkout (it is not installed in the venv)
    sys.path.insert(0, str(REPO))

# ../shared/corpus next to the checkout (as CI has it), or wherever DELTA_DATAFUSION_CORPUS says
CORPUS = Path(os.environ.get("DELTA_DATAFUSION_CORPUS") or REPO.parent / "shared" / "corpus").resolve()
MANIFEST = CORPUS / "manifest.json"


def corpus_available() -> bool:
    return MANIFEST.is_file()


def corpus_missing_reason() -> str:
    return f"conformance corpus not found at {CORPUS} (expected {MANIFEST})"


@lru_cache(maxsize=1)
def load_manifest() -> dict[str, Any] | None:
    """The corpus manifest, or None when the corpus is absent."""
    if not corpus_available():
        return None
    with open(MANIFEST) as fh:
        return json.load(fh)


def manifest_tables() -> list[dict[str, Any]]:
    m = load_manifest()
    return list(m["tables"]) if m else []


def manifest_entry(name: str) -> dict[str, Any]:
    """The manifest's entry for table ``name`` (skips the calling test when the corpus is absent)."""
    require_corpus()
    for t in manifest_tables():
        if t["name"] == name:
            return t
    raise KeyError(f"table {name!r} is not in {MANIFEST}")


def require_corpus() -> Path:
    """The corpus root; skips the calling test when it is absent."""
    if not corpus_available():
        pytest.skip(corpus_missing_reason())
    return CORPUS


def corpus_table(name: str) -> Path:
    """Path of ``tables/<name>`` in the corpus (skips when the corpus or the table is absent)."""
    path = require_corpus() / "tables" / name
    if not path.is_dir():
        pytest.skip(f"corpus table {name!r} not found at {path}")
    return path


@pytest.fixture(scope="session")
def corpus() -> Path:
    """The corpus root directory (skips when absent)."""
    return require_corpus()


def make_writable(root: Path) -> None:
    """The corpus is read-only; copies must be editable (and removable by tmp_path cleanup)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o644)


def copy_table(src: Path | str, dst: Path | str) -> Path:
    """Copy a table directory (data, log, odd file names) to ``dst`` and make it writable.

    File modification times are preserved (``copy2``) so that timestamp-based tests can rely on them
    only where they set them explicitly.
    """
    dst = Path(dst)
    shutil.copytree(src, dst, symlinks=False)
    make_writable(dst)
    return dst


@pytest.fixture
def copy_corpus_table(tmp_path: Path):
    """``copy_corpus_table(name)`` -> an editable copy of a corpus table under ``tmp_path``."""

    def _copy(name: str, dest_name: str | None = None) -> Path:
        return copy_table(corpus_table(name), tmp_path / (dest_name or name))

    return _copy


def log_dir(table: Path | str) -> Path:
    return Path(table) / "_delta_log"


def commit_path(table: Path | str, version: int) -> Path:
    return log_dir(table) / f"{version:020d}.json"


def write_commit(table: Path | str, version: int, actions: list[dict[str, Any]]) -> Path:
    """Write ``actions`` as the NDJSON commit file of ``version``."""
    path = commit_path(table, version)
    path.write_text("".join(json.dumps(a) + "\n" for a in actions))
    return path


def one_row_appends(table: Path | str, count: int, configuration: dict[str, str] | None = None) -> Path:
    """``count`` appends by deltalake of one row each (``id`` = 0, 1, ...): versions 0..count-1 of
    a new table, protocol and metaData in commit 0 only; ``configuration``: its table properties."""
    import deltalake

    for i in range(count):
        deltalake.write_deltalake(
            str(table),
            pa.table({"id": pa.array([i], pa.int64())}),
            mode="append",
            configuration=configuration,
        )
    return Path(table)


def metadata_action(
    schema: dict[str, Any],
    partition_columns: list[str] | None = None,
    configuration: dict[str, str] | None = None,
    table_id: str = "x",
) -> dict[str, Any]:
    """A ``metaData`` action of a parquet table with ``schema`` (Delta's schema JSON, as a dict)."""
    return {
        "metaData": {
            "id": table_id,
            "format": {"provider": "parquet", "options": {}},
            "schemaString": json.dumps(schema),
            "partitionColumns": list(partition_columns or []),
            "configuration": dict(configuration or {}),
        }
    }


def with_partition_values(checkpoint: pa.Table, values: Any) -> pa.Table:
    """A checkpoint (or sidecar) table whose adds' partitionValues map is ``values(map)`` (each
    null add kept null): to damage a checkpoint leaf's partition values."""
    adds = checkpoint.column("add").combine_chunks()
    i = adds.type.get_field_index("partitionValues")
    kids = [adds.field(j) for j in range(adds.type.num_fields)]
    kids[i] = values(kids[i])
    fields = list(adds.type)
    fields[i] = pa.field(fields[i].name, kids[i].type, nullable=True)
    adds = pa.StructArray.from_arrays(kids, fields=fields, mask=pc.invert(adds.is_valid()))
    return checkpoint.set_column(checkpoint.schema.get_field_index("add"), pa.field("add", adds.type), adds)


def without_partition_values(checkpoint: pa.Table) -> pa.Table:
    """A checkpoint table whose adds have a null partitionValues map."""
    return with_partition_values(checkpoint, lambda pv: pa.nulls(len(pv), pv.type))


@contextmanager
def in_zone(zone: str) -> Iterator[None]:
    """The process's local time zone is ``zone`` (TZ) inside the block, and as before after it."""
    import time

    old = os.environ.get("TZ")
    os.environ["TZ"] = zone
    time.tzset()
    try:
        yield
    finally:
        if old is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = old
        time.tzset()


def add_action(table: Path | str, name: str, **extra: Any) -> dict[str, Any]:
    """The add action of the data file ``name`` already written under ``table``."""
    size = (Path(table) / name).stat().st_size
    return {
        "path": name,
        "partitionValues": {},
        "size": size,
        "modificationTime": 0,
        "dataChange": True,
        **extra,
    }


def files_summary(files: pa.Table) -> list[tuple[str, int]]:
    """Sorted (decoded path, size) pairs of a scan-metadata file table."""
    return sorted(zip(files.column("path").to_pylist(), files.column("size").to_pylist(), strict=True))


def dv_cardinalities(files: pa.Table) -> int:
    """Sum of the deletion-vector cardinalities of the live files."""
    if files.num_rows == 0:
        return 0
    card = pc.struct_field(files.column("deletion_vector").combine_chunks(), "cardinality")
    return int(pc.sum(pc.fill_null(card, 0)).as_py() or 0)


def footer_row_count(files: pa.Table) -> int:
    """Sum of the parquet footer row counts of the live files (opens every file)."""
    return sum(pq.ParquetFile(loc).metadata.num_rows for loc in files.column("location").to_pylist())


def live_row_count(files: pa.Table) -> int:
    """Rows of a snapshot implied by its live files: footer rows minus deleted rows."""
    return footer_row_count(files) - dv_cardinalities(files)


def all_files_have_stats(files: pa.Table) -> bool:
    if files.num_rows == 0:
        return True
    num = pc.struct_field(files.column("stats").combine_chunks(), "numRecords")
    return num.null_count == 0


def folder_state(root: Path | str) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``root``: relative path -> (kind, size, mtime_ns). Detects any write."""
    root = Path(root)
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            kind = "dir" if p.is_dir() else "file"
            out[str(p.relative_to(root))] = (kind, 0 if kind == "dir" else st.st_size, st.st_mtime_ns)
    st = root.lstat()
    out["."] = ("dir", 0, st.st_mtime_ns)
    return out


@pytest.fixture
def fresh_change_feed_cache():
    """Change feeds and footer statistics are cached per process: start and end each test empty."""
    from delta_datafusion.changes import clear_cache

    clear_cache()
    yield
    clear_cache()


def predicate_trees(leaves, max_leaves: int):
    """Hypothesis strategy: AND / OR / NOT trees (2-3 children) over the ``leaves`` strategy."""
    from hypothesis import strategies as st

    from delta_datafusion.predicate import And, Not, Or

    return st.recursive(
        leaves,
        lambda kids: st.one_of(
            st.lists(kids, min_size=2, max_size=3).map(lambda ks: And(tuple(ks))),
            st.lists(kids, min_size=2, max_size=3).map(lambda ks: Or(tuple(ks))),
            kids.map(Not),
        ),
        max_leaves=max_leaves,
    )


_SUMMARY_SHOWN = pytest.StashKey[bool]()


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ARG001
    """Note that a run's summary was shown (not so for ``--help`` or a run that never started)."""
    config.stash[_SUMMARY_SHOWN] = True


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """Say loudly, last, when the corpus was absent: its tests were skipped, not passed. (In the
    terminal summary the warning came before pytest's list of skipped tests, which ``-ra`` makes
    hundreds of lines long without the corpus.)"""
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and config.stash.get(_SUMMARY_SHOWN, False) and not corpus_available():
        reporter.write_sep(
            "!",
            f"{corpus_missing_reason()}: corpus tests were SKIPPED (set DELTA_DATAFUSION_CORPUS)",
            red=True,
        )


def python_schema_catalog(tables: set[str]) -> Any:
    """A datafusion memory catalog whose schema ``s`` is a user's Python ``SchemaProvider``
    listing ``tables`` (``table_names`` a method, as datafusion's base class declares it) and
    serving none of them."""
    from datafusion.catalog import Catalog, SchemaProvider

    class Names(SchemaProvider):
        def owner_name(self) -> None:
            return None

        def table_names(self) -> set[str]:
            return set(tables)

        def table(self, name: str) -> None:
            return None

        def table_exist(self, name: str) -> bool:
            return name in tables

    catalog = Catalog.memory_catalog()
    catalog.register_schema("s", Names())
    return catalog


def count_stats_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the number of stats strings of each ``stats.parse_stats_json`` call."""
    import delta_datafusion.stats as stats

    parsed: list[int] = []
    parse = stats.parse_stats_json

    def counting(strings, *args, **kwargs):
        parsed.append(len(strings))
        return parse(strings, *args, **kwargs)

    monkeypatch.setattr(stats, "parse_stats_json", counting)
    return parsed


def record_read_threads(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """From now on, the ``use_threads`` of each ``pq.ParquetFile.read`` call (pyarrow's default
    when not given: True)."""
    threaded: list[bool] = []
    read = pq.ParquetFile.read

    def spying(self, *args, **kwargs):
        threaded.append(kwargs.get("use_threads", True))
        return read(self, *args, **kwargs)

    monkeypatch.setattr(pq.ParquetFile, "read", spying)
    return threaded
