"""Version checksum files (``_delta_log/NNN.crc``): the table's protocol and metadata at a version.

Spark (and delta-kernel-rs) write one beside each commit, holding among other things the
protocol and metaData in force at that version (PROTOCOL.md, "Version Checksum File"). Reading
it stands in for reading back through the commits before it to find them, as delta-kernel-rs
and Spark do when they load a snapshot. Like ``_last_checkpoint`` it is a hint: a checksum that
is missing, unreadable, not the JSON object the protocol describes, or lacking either action is
no checksum (the commits are read as without it). Checking one against the log would take the
whole replay it saves; neither delta-kernel-rs nor Spark check it when they load a snapshot.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..errors import DeltaError
from ..storage import FileInfo, Storage
from .segment import LogListing, LogSegment


@dataclass(frozen=True)
class VersionChecksum:
    """A listed checksum file and the version it describes."""

    version: int
    file: FileInfo

    def protocol_metadata(self, storage: Storage) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The checksum's protocol and metaData actions; None when it gives not both (read
        failures included: the file is optional, the commits say the same)."""
        try:
            found = json.loads(storage.read_listed(self.file.path, self.file.listed_size))
        except (OSError, ValueError, RecursionError, DeltaError):  # not there, not JSON, not UTF-8
            return None
        if not isinstance(found, dict):
            return None
        protocol, metadata = found.get("protocol"), found.get("metadata")
        if not isinstance(protocol, dict) or not isinstance(metadata, dict):
            return None
        return protocol, metadata


def checksum_for(listing: LogListing, segment: LogSegment) -> VersionChecksum | None:
    """The newest listed checksum a search for ``segment``'s protocol and metadata can stop at:
    at or before the segment's version, and not before its checkpoint (which says as much and
    is nearer). Between the two every version has a commit in the segment."""
    floor = segment.checkpoint_version or 0
    versions = [v for v in listing.checksums if floor <= v <= segment.version]
    if not versions:
        return None
    version = max(versions)
    return VersionChecksum(version, listing.checksums[version])
