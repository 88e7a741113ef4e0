"""The SQL surface a session offers around Delta tables: registering folder catalogs over names the
session already uses, and what replacing one keeps alive. Tables are written by deltalake here."""

from __future__ import annotations

import gc
import shutil
import weakref
from pathlib import Path

import pyarrow as pa
import pytest
from conftest import python_schema_catalog

pytest.importorskip("deltalake")
from datafusion import SessionContext  # noqa: E402
from deltalake import write_deltalake  # noqa: E402

import delta_datafusion as dd  # noqa: E402
from delta_datafusion.errors import ArgumentError  # noqa: E402


def _lake(root: Path) -> Path:
    """A folder holding one Delta table, ``t`` (ids 0..4)."""
    write_deltalake(str(root / "t"), pa.table({"id": pa.array(range(5), pa.int64())}))
    return root


def _count(ctx: SessionContext, sql: str) -> int:
    return ctx.sql(sql).to_pylist()[0]["n"]


def test_register_catalog_refuses_the_default_catalogs_name(tmp_path: Path) -> None:
    """Registering over ``datafusion`` replaced the default catalog: every table registered before
    (Delta or not) was gone, and ``SELECT ... FROM t`` failed with 'table not found'."""
    root = _lake(tmp_path)
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", str(root / "t"))
    ctx.register_record_batches("mem", [[pa.record_batch({"x": [1, 2]})]])
    with pytest.raises(ArgumentError, match="'datafusion' holding tables"):
        dd.register_catalog(ctx, "datafusion", str(root))
    assert _count(ctx, "SELECT count(*) AS n FROM t") == 5
    assert _count(ctx, "SELECT count(*) AS n FROM mem") == 2


def test_register_catalog_over_an_empty_catalog_keeps_its_default_schema(tmp_path: Path) -> None:
    """Over the empty default catalog, a folder catalog serving ``default`` dropped the session's
    default schema ``public``: unqualified names and ``register_table`` then failed with
    DataFusion's 'failed to resolve schema: public'. Serving ``public`` (the session's default
    schema) is accepted and unqualified names read the folder's tables."""
    root = _lake(tmp_path)
    ctx = SessionContext()
    dd.register(ctx)
    with pytest.raises(ArgumentError, match=r"has the schema\(s\) 'public'.*pass schema='public'"):
        dd.register_catalog(ctx, "datafusion", str(root))
    dd.register_table(ctx, "u", str(root / "t"))  # the session's default schema is still there
    assert _count(ctx, "SELECT count(*) AS n FROM u") == 5
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_catalog(ctx, "datafusion", str(root), schema="public")
    assert _count(ctx, "SELECT count(*) AS n FROM t") == 5


def test_register_catalog_over_an_empty_catalog_with_two_schemas(tmp_path: Path) -> None:
    """One schema= cannot keep two schemas: the refusal named the other one to pass, whichever
    was passed (schema='public' suggested 'x', schema='x' suggested 'public')."""
    from datafusion import SessionConfig
    from datafusion.catalog import Schema

    root = _lake(tmp_path)
    ctx = SessionContext(SessionConfig().with_default_catalog_and_schema("lake", "public"))
    dd.register(ctx)
    ctx.catalog("lake").register_schema("x", Schema.memory_schema())
    for schema in ("default", "public", "x"):
        with pytest.raises(
            ArgumentError, match=r"'lake' has the schemas 'public', 'x'.*choose another catalog"
        ) as e:
            dd.register_catalog(ctx, "lake", str(root), schema=schema)
        assert "pass schema=" not in str(e.value)


def test_register_catalog_over_a_catalog_with_a_python_schema(tmp_path: Path) -> None:
    """A schema written to datafusion's SchemaProvider (table_names a method, no names()) is read
    for its tables: the check raised AttributeError: no attribute 'names'."""
    root = _lake(tmp_path)
    ctx = SessionContext()
    dd.register(ctx)
    ctx.register_catalog_provider("c", python_schema_catalog({"Foo"}))
    with pytest.raises(ArgumentError, match=r"'c' holding tables \(s.Foo\)"):
        dd.register_catalog(ctx, "c", str(root))


def test_register_catalog_replaces_its_own_catalog_and_frees_the_old_one(tmp_path: Path) -> None:
    """A folder catalog registered again under its name serves the new root; the catalog it
    replaced (and the snapshots it cached) is no longer kept by the package."""
    first = _lake(tmp_path / "one")
    second = tmp_path / "two"
    write_deltalake(str(second / "t"), pa.table({"id": pa.array(range(3), pa.int64())}))
    ctx = SessionContext()
    dd.register(ctx)
    old = dd.register_catalog(ctx, "lake", str(first))
    assert _count(ctx, "SELECT count(*) AS n FROM lake.default.t") == 5
    gone = weakref.ref(old)
    del old
    dd.register_catalog(ctx, "lake", str(second))
    assert _count(ctx, "SELECT count(*) AS n FROM lake.default.t") == 3
    gc.collect()
    assert gone() is None


def test_folder_catalog_forgets_a_removed_table_named_again_or_listed(tmp_path: Path) -> None:
    """A table folder removed from a folder catalog's root: the snapshot the catalog cached for it
    is dropped when a query names it again (it is not found) or SHOW TABLES lists the folder."""
    root = _lake(tmp_path / "lake")
    for name in ("a", "b"):
        write_deltalake(str(root / name), pa.table({"id": pa.array(range(2), pa.int64())}))
    ctx = SessionContext()
    dd.register(ctx)
    provider = dd.register_catalog(ctx, "lake", str(root))
    for name in ("a", "b"):
        assert _count(ctx, f"SELECT count(*) AS n FROM lake.default.{name}") == 2
    cached = {d.label: weakref.ref(d) for d in provider.datasets()}
    for name in ("a", "b"):
        shutil.rmtree(root / name)
    with pytest.raises(Exception, match="not found"):
        ctx.sql("SELECT count(*) FROM lake.default.a").collect()
    ctx.sql("SHOW TABLES").collect()
    gc.collect()
    assert cached["a"]() is None
    assert cached["b"]() is None
    assert _count(ctx, "SELECT count(*) AS n FROM lake.default.t") == 5


def test_folder_catalog_does_not_keep_every_table_that_came_and_went(tmp_path: Path) -> None:
    """A service whose folder catalog sees tables come and go (each queried while it exists, never
    named after its folder is removed) keeps the cached snapshots of the tables that remain, and
    at most those opened since the catalog last listed its root, not one per table ever seen."""
    root = _lake(tmp_path / "lake")
    ctx = SessionContext()
    dd.register(ctx)
    provider = dd.register_catalog(ctx, "lake", str(root))
    refs = []
    for i in range(60):
        path = root / f"s{i}"
        write_deltalake(str(path), pa.table({"id": pa.array(range(3), pa.int64())}))
        assert _count(ctx, f"SELECT count(*) AS n FROM lake.default.s{i}") == 3
        refs += [weakref.ref(d) for d in provider.datasets() if d.label == f"s{i}"]
        shutil.rmtree(path)
    gc.collect()
    assert len(refs) == 60
    alive = sum(ref() is not None for ref in refs)
    assert alive <= 17, f"{alive} snapshots of removed tables still cached"
