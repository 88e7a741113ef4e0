"""The process cache of change feeds. The SQL function plans on every statement (EXPLAIN
included), so a range's feed is built once and reused while its commit files are unchanged;
:func:`clear_cache` also forgets the other caches a feed is built from."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..log.segment import list_log
from ..lru import LruCache
from ..protocol import clear_schema_cache
from .feed import ChangeFeed, require_commits
from .footers import clear_footer_cache
from .version_range import clear_timelines, resolve_range

if TYPE_CHECKING:
    from ..log.actions import CommitData
    from ..table import DeltaTable


FEED_CACHE_SIZE = 16


_FEEDS: LruCache[ChangeFeed] = LruCache(FEED_CACHE_SIZE)


def load_change_feed(
    table: DeltaTable, start: Any, end: Any = None, known: Sequence[CommitData] = ()
) -> ChangeFeed:
    """The :class:`ChangeFeed` of a range given by versions or timestamps (LRU-cached).

    The cache key is the table location, storage options, the resolved versions and the size,
    modification time and entity tag (where the store lists one: S3 times are whole seconds) of
    every commit file in the range; a cached feed whose commit timestamps
    came from file times is also checked against the times of the commits before the range (each
    timestamp is made greater than every earlier one), so rewritten or re-timed commits (and a new
    latest version when ``end`` is omitted) are never served stale.

    ``known``: commits read already (a registered table's snapshot's): a feed made here reads
    only the others. The log is listed all the same: it says which version is the latest.
    """
    from ..table import relisting

    # a commit or checkpoint removed after the listing (a concurrent checkpoint and log cleanup)
    # is listed again, as snapshot() does: the range may still be there
    return relisting(lambda: _load(table, start, end, known))


def _load(table: DeltaTable, start: Any, end: Any, known: Sequence[CommitData]) -> ChangeFeed:
    listing = list_log(table.storage)
    s, e = resolve_range(table, start, end, listing)
    require_commits(listing, s, e, table.storage.root_uri)
    commit_state = tuple(
        (v, listing.commits[v].size, listing.commits[v].mtime_or_none(), listing.commits[v].etag)
        if v in listing.commits
        else (v, None, None, None)
        for v in range(s, e + 1)
    )
    key = (*table.storage.cache_key, s, e, commit_state)
    return _FEEDS.get_or_make(
        key, lambda: ChangeFeed(table, s, e, listing, known), lambda f: f.same_file_times(listing)
    )


def clear_cache() -> None:
    """Forget cached change feeds, commit timelines, footer statistics and parsed schemas."""
    _FEEDS.clear()
    clear_schema_cache()
    clear_timelines()
    clear_footer_cache()
