"""Schema compatibility across a change range: which end-schema columns can be read from files
written under the range's earlier metadata. A change feed reads every file with the end
version's schema, so each column is traced back through the range's schema changes (renames,
column mapping switches, repartitioning, retyping); what cannot be traced safely is refused
rather than read as wrong values or NULL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import pyarrow as pa

from ..errors import SchemaError
from ..protocol import Metadata
from ..schema import FIELD_ID_KEY, is_supported_type_change, physical_name
from ..stats import bounds_survive_widening


def retyped_columns(segments: list[tuple[int, Metadata]]) -> set[tuple[str, ...]]:
    """End-schema columns whose type differs under an earlier metadata of the range. Files
    written then carry bounds in the old type's form (a float -0.1 is -0.10000000149011612 read as
    a double), which need not bound the values as read now; a ``delta.typeChanges`` entry says
    so, but writers may remove it once every live file has the new type, while a range's older
    files are still read."""
    end = segments[-1][1]
    out: set[tuple[str, ...]] = set()

    def walk(old: pa.DataType, phys: pa.DataType, logical: pa.DataType, path: tuple[str, ...]) -> None:
        if old == phys:
            return
        if pa.types.is_struct(old) and pa.types.is_struct(phys):  # fields added later have no bounds
            old_fields = {f.name: f.type for f in old}
            for pf, lf in zip(phys, logical, strict=True):
                if pf.name in old_fields:
                    walk(old_fields[pf.name], pf.type, lf.type, (*path, lf.name))
            return
        if bounds_survive_widening(old) and is_supported_type_change(old, phys):
            return  # integer, decimal and date bounds are the same values in the wider type
        out.add(path)

    for (_, md), (_, newer) in zip(segments[:-1], segments[1:], strict=True):
        if md.schema_string == end.schema_string or appends_columns(md, newer):
            continue  # an appended column has no older type: ``newer`` gives all ``md`` would
        old_types = {f.name: f.type for f in md.physical_schema}
        for logical, phys in zip(end.arrow_schema, end.physical_schema, strict=True):
            if phys.name in old_types:
                walk(old_types[phys.name], phys.type, logical.type, (logical.name,))
    return out


def _same_layout(a: Metadata, b: Metadata) -> bool:
    """Do files written under ``a`` and ``b`` store the same columns the same way? (A metaData
    action that only sets table properties changes nothing a change feed reads files by.)"""
    return (
        a.column_mapping_mode == b.column_mapping_mode
        and a.partition_columns == b.partition_columns
        and (a.schema_json is b.schema_json or a.schema_string == b.schema_string)
    )


def appends_columns(older: Metadata, newer: Metadata) -> bool:
    """Is ``newer``'s schema ``older``'s with top-level columns appended, without column mapping
    (names unique ignoring case, so a column is found by its name)? Each commit of a schema-merging
    writer adding a column is one: its columns are read from older files as from ``newer``'s."""
    if older.column_mapping_mode != "none" or newer.column_mapping_mode != "none":
        return False
    old, new = older.schema_json["fields"], newer.schema_json["fields"]
    return len(old) <= len(new) and (old is new or new[: len(old)] == old)


def layout_changes(segments: list[tuple[int, Metadata]]) -> list[tuple[int, Metadata]]:
    """``segments`` without those of the same layout as the one before (see :func:`_same_layout`):
    the first of each run, the last one last (the end's metadata, as in ``segments``)."""
    out: list[tuple[int, Metadata]] = []
    for v, md in segments:
        if out and _same_layout(out[-1][1], md):
            continue
        out.append((v, md))
    if out[-1][1] is not segments[-1][1]:
        out[-1] = (out[-1][0], segments[-1][1])
    return out


def incompatible_columns(chain: Sequence[Metadata], memo: dict | None = None) -> dict[str, str]:
    """End-schema columns that cannot be read from files written under ``chain[0]`` (name ->
    reason); see :func:`_incompatible_columns`. ``memo`` shares traces and sibling lookups
    between the calls of one planning."""
    with _sibling_lookups(memo):
        return _incompatible_columns(chain, memo)


def _incompatible_columns(chain: Sequence[Metadata], memo: dict | None = None) -> dict[str, str]:
    """End-schema columns that cannot be read from files written under ``chain[0]`` (name ->
    reason); ``chain`` is the metadata in force from then to the end (``chain[-1]``), in order.

    A column is followed back through every metadata change: by field id (or physical name)
    where column mapping is on at both sides of a change, by logical name where it is off at
    either (removing the mapping stores fields under their names again; an upgrade keeps the
    names fields have). A column with no counterpart was added later and is NULL for older
    changes; one stored under another physical name then (at any depth), repartitioned, or
    retyped incompatibly cannot be read from those files."""
    old, end = chain[0], chain[-1]
    if (
        old.schema_string == end.schema_string
        and old.partition_columns == end.partition_columns
        and old.column_mapping_mode == end.column_mapping_mode
        and all(m.column_mapping_mode == end.column_mapping_mode for m in chain)
    ):
        return {}
    # the reader finds a column by field id when both ends are in id mode, else by physical name;
    # ids identify fields only if the mapping stayed in id mode throughout
    by_id = all(m.column_mapping_mode == "id" for m in chain)
    # without any mapping, a field is its name: one dropped and added again is the same field
    unmapped = all(m.column_mapping_mode == "none" for m in chain)
    out: dict[str, str] = {}
    taken = None  # the physical names older files store, for fields added later
    for f in end.schema_json["fields"]:
        name = f["name"]
        phys = physical_name(f, end.column_mapping_mode)
        # unmapped, each step finds it by name: where it is at every step, old has it by that name
        traced = None if unmapped else _trace_back([f], chain, memo)
        if traced is None and unmapped:
            # a column dropped and added back is the same column: its partitioning and type
            # are checked as for one never dropped
            olds = old.schema_json["fields"]
            same = _sibling_index(olds, "name").get(name)
            if same is None:  # renamed by case only (Delta names are case-insensitive)
                same = _sibling_index(olds, "lower").get(name.lower())
            traced = None if same is None else [same]
        if traced is None:
            # added later (a partition column too): NULL for older changes, unless their files
            # hold another field under the name it is read by
            if not by_id and not unmapped:
                if taken is None:
                    taken = _physical_names(old.schema_json["fields"], old.column_mapping_mode)
                if phys in taken:
                    out[name] = f"older files store another field as {phys!r}"
            continue
        of = traced[-1]
        if not by_id and not unmapped:
            moved = _stored_elsewhere([f], traced, chain, memo)
            if moved is not None:
                path, was = moved
                out[name] = (
                    f"field {'.'.join(path)} was stored as {was!r} (column mapping {old.column_mapping_mode!r} "
                    f"then {end.column_mapping_mode!r})"
                )
                continue
        end_part = name in end.partition_columns
        old_part = of["name"] in old.partition_columns
        if old_part != end_part:
            out[name] = "partitioning changed" + (" (was a partition column)" if old_part else "")
            continue
        old_t = old.physical_schema.field(physical_name(of, old.column_mapping_mode)).type
        new_t = end.physical_schema.field(phys).type
        if not is_supported_type_change(old_t, new_t):
            out[name] = f"type changed from {old_t} to {new_t}"
    return out


def _children(t: Any) -> list[dict]:
    """The children of a Delta schema type: a struct's fields; for an array its element, for a
    map its key and value, as unnamed (``"container": True``) children matched by position."""
    if not isinstance(t, dict):
        return []
    if t.get("type") == "struct":
        return t.get("fields", [])
    if t.get("type") == "array":
        return [{"name": "element", "type": t.get("elementType"), "container": True}]
    if t.get("type") == "map":
        return [
            {"name": "key", "type": t.get("keyType"), "container": True},
            {"name": "value", "type": t.get("valueType"), "container": True},
        ]
    return []


def _physical_names(fields: list[dict], mode: str) -> set[str]:
    return {physical_name(f, mode) for f in fields if not f.get("container")}


#: id(siblings) -> (siblings, {lookup kind: {key: first sibling with it}}) for the planning in
#: progress (:func:`_sibling_lookups`); the list is kept so that its id is not reused while the
#: entry lives. Process-wide, the lookups held every schema field list ever compared (up to
#: 4,096) after the feeds and parsed schemas were gone.
_SIBLINGS: ContextVar[dict[int, tuple[list[dict], dict[str, dict[Any, dict]]]] | None] = ContextVar(
    "delta_datafusion_sibling_lookups", default=None
)


_AMBIGUOUS: dict = {}


@contextmanager
def _sibling_lookups(memo: dict | None) -> Iterator[None]:
    """Sibling lookups for one call, or for every call sharing ``memo`` (one feed's planning)."""
    if _SIBLINGS.get() is not None:
        yield
        return
    token = _SIBLINGS.set(memo.setdefault(_SIBLINGS, {}) if memo is not None else {})
    try:
        yield
    finally:
        _SIBLINGS.reset(token)


def _sibling_index(siblings: list[dict], kind: str) -> dict[Any, dict]:
    """``siblings`` by container name, field id, name or physical name (``phys:<mode>``), first
    one winning: a field traced through many schema changes of many columns looked each step up
    by a scan of its siblings (a range over 30 changes of 300 columns planned for 8 s)."""
    index = _SIBLINGS.get()
    if index is None:  # outside planning: nothing to share
        index = {}
    entry = index.get(id(siblings))
    if entry is None or entry[0] is not siblings:
        entry = index[id(siblings)] = (siblings, {})
    built = entry[1].get(kind)
    if built is None:
        built = {}
        for s in siblings:
            if kind == "container":
                key = s["name"] if s.get("container") else None
            elif s.get("container"):
                continue
            elif kind == "id":
                key = (s.get("metadata") or {}).get(FIELD_ID_KEY)
            elif kind == "name":
                key = s["name"]
            elif kind == "lower":  # a name two fields share ignoring case matches neither
                key = s["name"].lower()
                if key in built:
                    built[key] = _AMBIGUOUS
                    continue
            else:
                try:
                    key = physical_name(s, kind.split(":", 1)[1])
                except SchemaError:
                    continue
            if key is not None and key not in built:
                built[key] = s
        if kind == "lower":
            built = {k: v for k, v in built.items() if v is not _AMBIGUOUS}
        entry[1][kind] = built
    return built


def _counterpart(field: dict, siblings: list[dict], newer: str, older: str) -> dict | None:
    """The field of ``siblings`` (under mapping mode ``older``) that ``field`` (under ``newer``)
    was before a metadata change."""
    if field.get("container"):
        return _sibling_index(siblings, "container").get(field["name"])
    if newer != "none" and older != "none":
        fid = field.get("metadata", {}).get(FIELD_ID_KEY)
        if fid is not None:
            return _sibling_index(siblings, "id").get(fid)
    if newer == "none":  # no mapping now: a removal keeps the logical names
        return _sibling_index(siblings, "name").get(field["name"])
    # both mapped (no id): the same physical name; an upgrade to a mapping keeps the names the
    # fields had as their physical names
    return _sibling_index(siblings, f"phys:{older}").get(physical_name(field, newer))


def _trace_back(path: list[dict], chain: Sequence[Metadata], memo: dict | None = None) -> list[dict] | None:
    """A field path (top-level field, then fields inside it) of ``chain[-1]``'s schema followed
    back to ``chain[0]``'s; None when the field did not exist then.

    ``memo``: traces over chains that all end at the same metadata, keyed by path and chain
    length; with the trace over ``chain[1:]`` known, one step remains (tracing every column over
    every suffix of a range's metadata changes was quadratic in their number)."""
    if memo is None:
        traced: list[dict] | None = path
        for newer, older in zip(reversed(chain[1:]), reversed(chain[:-1]), strict=True):
            traced = _trace_step(traced, newer, older)
            if traced is None:
                return None
        return traced
    # container children are made anew by each _children call: keyed by their name (their
    # parent precedes them in the path), other fields by identity (the end schema's own dicts)
    fields = tuple(("container", f["name"]) if f.get("container") else id(f) for f in path)
    key = (fields, len(chain))
    if key not in memo:
        shorter = (fields, len(chain) - 1)
        if len(chain) < 2:
            memo[key] = path
        elif shorter in memo:
            later = memo[shorter]
            memo[key] = None if later is None else _trace_step(later, chain[1], chain[0])
        else:
            memo[key] = _trace_back(path, chain)
    return memo[key]


def _trace_step(path: list[dict], newer: Metadata, older: Metadata) -> list[dict] | None:
    """``path`` under ``newer``'s schema -> the same fields under ``older``'s (None: absent)."""
    siblings, found = older.schema_json["fields"], []
    for f in path:
        c = _counterpart(f, siblings, newer.column_mapping_mode, older.column_mapping_mode)
        if c is None:
            return None
        found.append(c)
        siblings = _children(c["type"])
    return found


def _stored_elsewhere(
    end_path: list[dict], old_path: list[dict], chain: Sequence[Metadata], memo: dict | None = None
) -> tuple[list[str], str] | None:
    """(the field's names, its old physical name) for the first field at or below ``end_path``
    that older files store under another physical name than the end's schema reads."""
    old_mode, end_mode = chain[0].column_mapping_mode, chain[-1].column_mapping_mode
    if not end_path[-1].get("container"):
        was = physical_name(old_path[-1], old_mode)
        if was != physical_name(end_path[-1], end_mode):
            return [f["name"] for f in end_path], was
    old_children = _children(old_path[-1]["type"])
    for child in _children(end_path[-1]["type"]):
        traced = _trace_back([*end_path, child], chain, memo)
        if traced is not None:
            found = _stored_elsewhere([*end_path, child], traced, chain, memo)
            if found is not None:
                return found
        elif not child.get("container") and physical_name(child, end_mode) in _physical_names(
            old_children, old_mode
        ):
            # added later, but older files hold another field under the name it is read by
            return [f["name"] for f in (*end_path, child)], "another field's name"
    return None
