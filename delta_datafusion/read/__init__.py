"""Reading scan units into Arrow batches with the table's logical schema.

Rows known from the log come first: when no data column is asked for (count(*), partition
columns, change-feed constants) and the filter is TRUE for every row of a unit (decided by its
partition values / constants, or proved by planning from its statistics), the unit yields
numRecords minus its deletion vector's cardinality rows of those values, unopened.
Everything else is read by one of two paths, both yielding batches cast exactly to the requested
output schema:

- fast path (files without row selection): one pyarrow dataset scan over a group of files, with
  the SQL-exact row filter pushed into pyarrow (row-group pruning included; a filter reads
  partition values and constants from fragment guarantees), and partition values and constant
  columns added to each batch as slices of one array per value;
- row-selection path (deletion vectors, change-feed DV diffs; files the dataset scanner cannot
  read as the table does: columns named by field id or in another case, string views under a
  filter; large filtered files read only up to their page index's row window): each file read
  in order, rows masked by position, then the filter and projection applied.

Column mapping: files are read with the physical schema (physical names, nested too), the filter
is renamed to physical names, and the output is renamed back to logical names (the mapping and
the stored-type rules are in :mod:`delta_datafusion.read_schema`).

Modules, by job:

* ``reader``: :class:`UnitReader`, which chooses each unit's path, and the fast path;
* ``known_rows``: rows known from the log, and when the log's figures are trusted;
* ``constants``: the columns the fast path's batches take from their unit (partition values,
  change-feed constants);
* ``nan_filters``: which filter conjuncts pyarrow's row-group skipping may see (float statistics
  leave NaN out);
* ``selected_rows``: the row-selection path, and a file batch turned into logical columns;
* ``file_checks``: each file's stored columns checked against the table schema (names in another
  case, types), and the footer facts that choose a file's path (string views, field ids,
  shredded variants);
* ``page_windows``: the rows of a file a filter can match, from its parquet page index;
* ``read_errors``: what a failed read raises, naming the file and why;
* ``batches``: the Python API's ``batch_size`` and the batch sizes pyarrow decodes in.
"""

from .batches import MAX_BATCH_SIZE, MIN_BATCH_SIZE, batches_of_at_most, checked_batch_size
from .reader import UnitReader

__all__ = ["MAX_BATCH_SIZE", "MIN_BATCH_SIZE", "UnitReader", "batches_of_at_most", "checked_batch_size"]
