"""Protocol and metadata actions: validation and the reader features this package supports."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from .errors import (
    InvalidProtocolError,
    LogCorruptError,
    MissingMetadataError,
    SchemaError,
    UnsupportedFeatureError,
)
from .lru import LruCache
from .schema import (
    annotated_field,
    check_type_changes,
    check_unique_physical_names,
    column_mapping_mode,
    known_prefix,
    parse_schema_string,
    physical_name,
    text_metadata,
    to_arrow_schema,
)

#: Reader features a snapshot can be read with. Every other reader feature is refused by name.
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        # not a protocol name, but some tables carry it for timestampNtz (delta-kernel-rs and
        # deltalake read it so); timestamp_ntz columns need nothing more of a reader
        "timestampWithoutTimezone",
        "v2Checkpoint",
        "vacuumProtocolCheck",  # only constrains VACUUM; nothing to do on read
        "typeWidening",
        "typeWidening-preview",
        # VARIANT columns are served as their parquet struct of binaries (value, metadata): the
        # protocol's alternative for engines without a variant type, which DataFusion 55 is
        "variantType",
        "variantType-preview",
        # shredding (the protocol's current name, and the preview's): a data file storing a
        # VARIANT shredded (typed_value beside value) is refused by name when a query reads the
        # column (read/file_checks.refuse_shredded_variants); unshredded files and the table's
        # other columns are read
        "variantShredding",
        "variantShredding-preview",
    }
)
#: Known reader features we refuse, with the reason shown to users.
REFUSED_READER_FEATURES = {
    "catalogManaged": "catalog-managed commits need the catalog to list unpublished commits",
    "catalogOwned-preview": "catalog-managed commits need the catalog to list unpublished commits",
}


#: Writer-only features (PROTOCOL.md's list, and newer ones delta-kernel-rs knows): never
#: refused in writerFeatures; the protocol does not allow them in readerFeatures.
WRITER_ONLY_FEATURES = frozenset(
    {
        "appendOnly",
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "allowColumnDefaults",
        "changeDataFeed",
        "identityColumns",
        "rowTracking",
        "domainMetadata",
        "icebergCompatV1",
        "icebergCompatV2",
        "icebergCompatV3",
        "clustering",
        "inCommitTimestamp",
        "inCommitTimestamp-preview",
        "materializePartitionColumns",
    }
)


@dataclass(frozen=True)
class Protocol:
    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] = frozenset()
    writer_features: frozenset[str] = frozenset()

    @classmethod
    def from_action(cls, action: dict[str, Any], where: str) -> Protocol:
        raw = action.get("minReaderVersion")
        if not isinstance(raw, int) or isinstance(raw, bool):  # "1" or 1.0 is not a protocol
            raise InvalidProtocolError(f"{where}: protocol action lacks a valid minReaderVersion: {action!r}")
        reader = raw
        try:
            writer = int(action.get("minWriterVersion") or 0)
        except (TypeError, ValueError) as e:
            raise InvalidProtocolError(
                f"{where}: protocol action has an invalid minWriterVersion: {action!r}"
            ) from e
        rf, wf = action.get("readerFeatures"), action.get("writerFeatures")
        for key, features in (("readerFeatures", rf), ("writerFeatures", wf)):
            if features is not None and (
                not isinstance(features, list) or not all(isinstance(f, str) for f in features)
            ):
                raise InvalidProtocolError(
                    f"{where}: protocol {key} must be a list of feature names, got {features!r:.120}"
                )
        if reader == 3 and rf is None:
            raise InvalidProtocolError(
                f"{where}: minReaderVersion 3 requires a readerFeatures list (the protocol action has none)"
            )
        return cls(reader, writer, frozenset(rf or ()), frozenset(wf or ()))

    @property
    def supports_in_commit_timestamps(self) -> bool:
        """Does the protocol carry the inCommitTimestamp writer feature? Without it the table
        property means nothing (delta-kernel-rs reads such tables by file modification times)."""
        return self.min_writer_version >= 7 and bool(
            {"inCommitTimestamp", "inCommitTimestamp-preview"} & self.writer_features
        )

    @property
    def supports_change_data_feed(self) -> bool:
        """Does ``delta.enableChangeDataFeed`` bind this protocol's writers? From writer version
        4, and at version 7 only with the changeDataFeed writer feature (PROTOCOL.md, Writer
        Requirements for AddCDCFile): other writers may commit an UPDATE without its cdc files."""
        v = self.min_writer_version
        return v >= 4 and (v < 7 or "changeDataFeed" in self.writer_features)

    @property
    def supports_column_mapping(self) -> bool:
        """Reader version 2, or 3 with the columnMapping feature. The mode property is allowed on
        other tables but means nothing there (their files use the logical names)."""
        v = self.min_reader_version
        return v == 2 or (v == 3 and "columnMapping" in self.reader_features)

    def check_readable(self, where: str) -> None:
        """Refuse protocols this reader cannot honour, naming the version or feature."""
        v = self.min_reader_version
        if v not in (1, 2, 3):
            raise InvalidProtocolError(
                f"{where}: minReaderVersion {v} is not a Delta reader version (this reader supports 1, 2 and 3)"
            )
        if v != 3 and self.reader_features:
            raise InvalidProtocolError(
                f"{where}: readerFeatures {sorted(self.reader_features)} are only allowed with minReaderVersion 3 "
                f"(table has {v})"
            )
        for feat in sorted(self.reader_features):
            if feat in SUPPORTED_READER_FEATURES:
                continue
            if feat in WRITER_ONLY_FEATURES:
                raise InvalidProtocolError(
                    f"{where}: protocol lists {feat!r} in readerFeatures, but {feat!r} is a writer-only "
                    "feature, which the protocol allows in writerFeatures only: the protocol action is invalid"
                )
            why = REFUSED_READER_FEATURES.get(feat, "it is not a reader feature this package knows")
            raise UnsupportedFeatureError(f"{where}: table requires reader feature {feat!r}: {why}")


@dataclass(frozen=True)
class ParsedSchema:
    """A ``schemaString`` parsed and checked, with its Arrow schemas per column-mapping mode.

    Shared by every metaData action carrying the same text: a change range of thousands of
    property-only commits of a 300-column table parsed and converted the same schema each time
    (4,000 such commits: 10 s and 1.3 GB to plan). Treat ``schema_json`` as read-only."""

    schema_string: str
    schema_json: dict[str, Any]
    #: the first field with a column-mapping physical name (see :func:`annotated_field`)
    annotated: str | None
    #: (the schema parsed before it, how many leading fields they share; see :func:`known_prefix`)
    base: tuple[weakref.ref[ParsedSchema], int] | None = field(default=None, repr=False)
    #: see :func:`text_metadata`
    plain: bool = False
    _arrow: dict[str, tuple[pa.Schema, pa.Schema]] = field(default_factory=dict, repr=False)

    def arrow(self, mode: str, where: str) -> tuple[pa.Schema, pa.Schema]:
        """(logical, physical) Arrow schemas under ``mode``; errors name ``where`` and are not kept."""
        hit = self._arrow.get(mode)
        if hit is None:
            known, n = self._base_arrow(mode)
            check_unique_physical_names(self.schema_json, mode, where, n)
            rest = {"fields": self.schema_json["fields"][n:]}
            try:
                hit = (
                    _appended(known[0], to_arrow_schema(rest, mode, physical=False)),
                    _appended(known[1], to_arrow_schema(rest, mode, physical=True)),
                )
            except SchemaError as e:
                raise SchemaError(f"{where}: {e}") from e
            hit = self._arrow.setdefault(mode, hit)  # two threads may both convert; one is kept
        return hit

    def _base_arrow(self, mode: str) -> tuple[tuple[pa.Schema | None, pa.Schema | None], int]:
        """The Arrow schemas of the fields this schema shares with :attr:`base` (converted under
        ``mode`` already) and their number; ``((None, None), 0)`` when there are none. Equal fields
        convert alike only where :attr:`plain` (``1`` equals ``true`` in Python, not in Arrow
        metadata)."""
        base = self.base[0]() if self.base is not None else None
        done = base._arrow.get(mode) if base is not None and base.plain else None
        if done is None:
            return (None, None), 0
        return done, self.base[1]


def _appended(known: pa.Schema | None, rest: pa.Schema) -> pa.Schema:
    if known is None:
        return rest
    if len(rest) > 8:
        return pa.schema([*known, *rest])
    for f in rest:  # a column or a few appended: no Python object per known field
        known = known.append(f)
    return known


#: schemas a process keeps parsed; a table rarely has more than a few distinct ones in a range
SCHEMA_CACHE_SIZE = 64
_SCHEMAS: LruCache[ParsedSchema] = LruCache(SCHEMA_CACHE_SIZE)


def _parsed_schema(schema_string: Any, where: str) -> ParsedSchema:
    """The :class:`ParsedSchema` of a ``schemaString``, cached by its exact text. Only valid
    schemas are cached: an invalid one is refused again by every action carrying it, each error
    naming its own file."""
    if not isinstance(schema_string, str):
        return _parse(schema_string, where)  # refused (not a string, or missing)
    return _SCHEMAS.get_or_make(schema_string, lambda: _parse(schema_string, where))


#: the schema parsed last (a weak reference): a schema appending columns to it checks and
#: converts only those (see :func:`known_prefix`)
_LAST: list[weakref.ref[ParsedSchema]] = []


def _parse(schema_string: Any, where: str) -> ParsedSchema:
    last = _LAST[-1]() if _LAST else None
    known = last.schema_json["fields"] if last is not None else None
    schema_json = parse_schema_string(schema_string, where, known)
    n = known_prefix(schema_json["fields"], known)
    check_type_changes(schema_json, where, n)
    annotated = annotated_field(schema_json, skip=n, skipped=last.annotated if n else None)
    base = (weakref.ref(last), n) if n else None
    # fields equal to plain ones are plain: only the others are walked
    plain = (n == 0 or last.plain) and text_metadata(schema_json["fields"][n:])
    parsed = ParsedSchema(schema_string, schema_json, annotated, base, plain)
    _LAST[:] = [weakref.ref(parsed)]
    return parsed


def clear_schema_cache() -> None:
    _SCHEMAS.clear()


@dataclass(frozen=True)
class Metadata:
    """The parsed metaData action and everything derived from its schema."""

    id: str
    schema_string: str
    schema_json: dict[str, Any]
    partition_columns: tuple[str, ...]
    configuration: dict[str, str]
    created_time: int | None
    name: str | None = None
    description: str | None = None
    column_mapping_mode: str = "none"
    arrow_schema: pa.Schema = field(default=None, repr=False)  # logical
    physical_schema: pa.Schema = field(default=None, repr=False)
    #: whether the protocol in force carries the inCommitTimestamp feature (see ict_enablement)
    ict_feature: bool = True

    @classmethod
    def from_action(cls, action: dict[str, Any], where: str, protocol: Protocol | None = None) -> Metadata:
        """``protocol``: the protocol in force, which decides whether column mapping applies."""
        fmt = action.get("format") or {}
        provider = fmt.get("provider", "parquet") if isinstance(fmt, dict) else "parquet"
        if provider not in (None, "parquet"):
            raise UnsupportedFeatureError(
                f"{where}: data file format {provider!r} is not supported (only parquet)"
            )
        parsed = _parsed_schema(action.get("schemaString"), where)
        schema_json = parsed.schema_json
        conf = action.get("configuration") or {}
        if not isinstance(conf, dict):
            raise SchemaError(f"{where}: metaData.configuration is not an object")
        conf = {str(k): ("" if v is None else str(v)) for k, v in conf.items()}
        try:
            mode = column_mapping_mode(conf)
        except SchemaError as e:
            raise SchemaError(f"{where}: {e}") from e
        if protocol is not None and not protocol.supports_column_mapping:
            # The mode property alone means nothing; physical names in the schema without the
            # feature leave no way to know which names the data files use (delta-kernel-rs
            # refuses such tables too; reading either way could give NULL columns silently).
            annotated = parsed.annotated
            if annotated is not None:
                raise SchemaError(
                    f"{where}: column {annotated!r} has a column-mapping physical name but the protocol "
                    f"(reader version {protocol.min_reader_version}, reader features "
                    f"{sorted(protocol.reader_features)}) does not enable column mapping: the table is "
                    "inconsistent (its writer set delta.columnMapping.mode without the columnMapping feature)"
                )
            mode = "none"
        if "partitionColumns" not in action:  # required: reading as unpartitioned would drop values
            raise SchemaError(f"{where}: metaData lacks partitionColumns (a required field)")
        raw_parts = action.get("partitionColumns")  # null or "" is refused, not read as unpartitioned
        if not isinstance(raw_parts, list | tuple) or not all(isinstance(c, str) for c in raw_parts):
            raise SchemaError(
                f"{where}: partitionColumns must be a list of column names, got {raw_parts!r:.80}"
            )
        parts = tuple(raw_parts)
        if len(set(parts)) != len(parts):
            raise SchemaError(f"{where}: partitionColumns {list(parts)} name a column more than once")
        names = {f["name"] for f in schema_json["fields"]}
        missing = [p for p in parts if p not in names]
        if missing:
            raise SchemaError(f"{where}: partition columns {missing} are not in the table schema")
        logical, physical = parsed.arrow(mode, where)
        return cls(
            id=str(action.get("id") or ""),
            schema_string=parsed.schema_string,  # one string per distinct schema, not per action
            schema_json=schema_json,
            partition_columns=parts,
            configuration=conf,
            created_time=action.get("createdTime"),
            name=action.get("name"),
            description=action.get("description"),
            column_mapping_mode=mode,
            arrow_schema=logical,
            physical_schema=physical,
            ict_feature=protocol is None or protocol.supports_in_commit_timestamps,
        )

    def field_json(self, name: str) -> dict[str, Any]:
        for f in self.schema_json["fields"]:
            if f["name"] == name:
                return f
        raise KeyError(name)

    def physical_partition_columns(self) -> list[str]:
        return [physical_name(self.field_json(c), self.column_mapping_mode) for c in self.partition_columns]

    @property
    def change_data_feed_enabled(self) -> bool:
        return self.configuration.get("delta.enableChangeDataFeed", "false").lower() == "true"

    @property
    def in_commit_timestamps_enabled(self) -> bool:
        """The property is set and the protocol carries the feature."""
        return (
            self.ict_feature
            and self.configuration.get("delta.enableInCommitTimestamps", "false").lower() == "true"
        )

    @property
    def ict_enablement(self) -> tuple[int, int] | None:
        """(version, timestamp ms) from which in-commit timestamps are used, or None."""
        if not self.in_commit_timestamps_enabled:
            return None
        v = self.configuration.get("delta.inCommitTimestampEnablementVersion")
        t = self.configuration.get("delta.inCommitTimestampEnablementTimestamp")
        if v is None and t is None:
            return (0, 0)  # enabled at table creation
        if v is None or t is None:
            given, missing = (
                ("EnablementVersion", "EnablementTimestamp")
                if t is None
                else ("EnablementTimestamp", "EnablementVersion")
            )
            raise LogCorruptError(
                f"table property delta.inCommitTimestamp{given} is set without "
                f"delta.inCommitTimestamp{missing}: in-commit timestamps enabled after creation need both"
            )
        try:
            return (int(str(v).strip()), int(str(t).strip()))
        except ValueError as e:
            raise LogCorruptError(
                f"table properties delta.inCommitTimestampEnablementVersion={v!r} and "
                f"delta.inCommitTimestampEnablementTimestamp={t!r} must be integers"
            ) from e


def require_metadata(metadata: Metadata | None, where: str, why: str = "") -> Metadata:
    """``metadata``, which must have been found; ``why``: what the error adds (e.g. the checkpoint
    that should have held it)."""
    if metadata is None:
        raise MissingMetadataError(
            f"{where}: no metaData action found in the log{why or ' (table metadata is missing)'}"
        )
    return metadata
