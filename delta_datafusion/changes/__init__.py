"""The change data feed (CDF): the rows inserted, deleted and updated between two versions.

Semantics follow PROTOCOL.md (Add CDC File, Deletion Vectors, In-Commit Timestamps) and
delta-kernel-rs ``table_changes``:

* a commit holding ``cdc`` actions contributes only its change data files; the files store
  ``_change_type`` themselves, ``_commit_version`` / ``_commit_timestamp`` are constants;
* any other commit contributes its ``add`` (``insert``) and ``remove`` (``delete``) actions with
  ``dataChange = true``; ``dataChange = false`` actions (OPTIMIZE, ...) contribute nothing;
* an ``add`` with a deletion vector contributes its rows not deleted by that vector, a ``remove``
  with one its rows that were still live (the vector's rows are skipped);
* a commit that removes a file and re-adds the same path (a new deletion vector) contributes only
  the rows whose deletion state changed: rows in the new vector but not the old one as ``delete``,
  rows in the old vector but not the new one as ``insert`` (un-deleted);
* ``_commit_timestamp`` is the commit's time as ``history()`` and time travel have it (PROTOCOL.md's
  rule from the latest table properties): the in-commit timestamp from the latest enablement
  version on, else the commit file's modification time made strictly increasing, as
  ``timestamp[us, UTC]``. delta-kernel-rs takes the in-commit timestamp of any commit made while
  they were enabled; after they were switched off later, such a time could lie outside the
  timestamp range that selected the commit;
* timestamps resolve to versions like time travel: a start timestamp selects the first commit at
  or after it, an end timestamp the last commit at or before it; ``end`` is inclusive;
* the change data feed must be enabled (``delta.enableChangeDataFeed``, under a protocol that binds
  writers to it: writer version 4 to 6, or 7 with the ``changeDataFeed`` feature) at the start
  version and at every ``metaData`` or ``protocol`` action inside the range, else
  :class:`~.errors.CdfNotEnabledError` names the version. Protocols in the range must be readable.
* the output schema is the end version's schema plus ``_change_type``, ``_commit_version`` and
  ``_commit_timestamp``. Schema changes inside the range are allowed as long as the columns read
  are compatible (same physical column, same or widened type, same partitioning); columns added
  later read as NULL for older changes. Reading an incompatible column is a
  :class:`~.errors.ChangeDataFeedError` naming the column and the version. When the start commit
  itself changes the schema, the files it removes are checked against the schema before it.

Planning (:meth:`ChangeFeed.plan`) works on one Arrow table of *change sources* (one row per file
to read, with kind, change type, version, timestamp, typed partition values and stats, and the
row selection) and prunes them in three stages before any data is read: by the conjuncts on the
change columns (evaluated on each source's constants; a cdc file may hold any change type), then
by partition values, then by file statistics (those the log gives adds and removes; for cdc
files and removes without them, their parquet footers' min/max and null counts). Rows are read
by :class:`~delta_datafusion.read.UnitReader`, which fills partition values and the change
constants and applies row selection, projection and the row filter.

Modules, by job:

* ``version_range``: the range's bounds (versions or timestamps) resolved to commit versions;
* ``feed``: :class:`ChangeFeed`, the checked and typed change sources of one range, and its
  planning (:class:`PlanResult`);
* ``sources``: the change-source table (:data:`SOURCE_COLUMNS`) built from a range's file actions;
* ``schema_compat``: which end-schema columns can be read from files written under earlier metadata;
* ``change_types``: the ``_change_type`` values a cdc file may hold for a predicate;
* ``footers``: parquet footer statistics of the files the log gives none for (cdc files);
* ``cache``: :func:`load_change_feed`, the process cache of feeds, and :func:`clear_cache`;
* ``scan``: :class:`ChangeScan` and :func:`changes`, the Python API's read of a range.
"""

from .cache import clear_cache, load_change_feed
from .feed import CHANGE_COLUMNS, CHANGE_FIELDS, ChangeFeed, PlanResult
from .scan import ChangeScan, changes
from .sources import SOURCE_COLUMNS

__all__ = [
    "CHANGE_COLUMNS",
    "CHANGE_FIELDS",
    "ChangeFeed",
    "ChangeScan",
    "PlanResult",
    "SOURCE_COLUMNS",
    "changes",
    "clear_cache",
    "load_change_feed",
]
