"""A process that exits right after a LIMIT query (or with a result stream still open) exits cleanly.

DataFusion may still pull a batch from a scan after a LIMIT query has returned; without the exit
guard in ``delta_datafusion.datafusion.dataset`` (``SCAN_THREADS``) the interpreter's exit kills
that thread inside Python/pyarrow code and the process aborts with exit code 134 ("FATAL:
exception not rethrown"). Each run is a fresh interpreter on a table written by deltalake that is
large enough for the leftover read to be in progress at exit.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest

pytest.importorskip("deltalake")
from deltalake import write_deltalake  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
FILES = 6
ROWS = 200_000


@pytest.fixture(scope="module")
def big_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("exit") / "events"
    for i in range(FILES):
        ids = pa.array(range(i * ROWS, (i + 1) * ROWS), pa.int64())
        batch = pa.table(
            {
                "id": ids,
                "x": pa.compute.multiply(ids.cast(pa.float64()), 0.5),
                "s": pa.compute.cast(ids, pa.string()),
            }
        )
        write_deltalake(str(path), batch, mode="append", configuration={"delta.enableChangeDataFeed": "true"})
    return path


SCRIPT = textwrap.dedent(
    """
    import sys
    from datafusion import SessionContext
    import delta_datafusion as dd

    path = sys.argv[1]
    ctx = SessionContext()
    dd.register(ctx)
    dd.register_table(ctx, "t", path)
    df = ctx.sql(sys.argv[2].replace("PATH", path))
    if sys.argv[3] == "collect":
        print(df.to_arrow_table().num_rows)
    else:  # the first batch of a stream, then exit with the stream still open
        for batch in df.execute_stream():
            print(batch.to_pyarrow().num_rows > 0)
            break
    """
)


@pytest.mark.parametrize(
    ("sql", "how", "printed"),
    [
        ("SELECT * FROM t LIMIT 5", "collect", "5"),
        ("SELECT * FROM table_changes('PATH', 0) LIMIT 5", "collect", "5"),
        ("SELECT * FROM t", "stream", "True"),
    ],
    ids=["table", "table_changes", "open_stream"],
)
def test_exit_right_after_a_partial_read(big_table: Path, sql: str, how: str, printed: str) -> None:
    for _ in range(3):
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT, str(big_table), sql, how],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
        assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
        assert done.stdout.strip() == printed


def test_forked_child_does_not_wait_for_the_parents_scans() -> None:
    """A child forked while the parent is producing a batch exits at once: the exit guard's state
    is reset in the child (else its exit would wait for a scan that does not exist there)."""
    import os
    import time

    from delta_datafusion.datafusion.dataset import SCAN_THREADS

    with SCAN_THREADS._cond:
        SCAN_THREADS._running += 1  # as while a batch is being produced
    try:
        pid = os.fork()
        if pid == 0:  # the child: its drain must not wait for the parent's batch
            start = time.monotonic()
            SCAN_THREADS.drain(timeout=5.0)
            os._exit(0 if time.monotonic() - start < 1.0 else 1)
        _, status = os.waitpid(pid, 0)
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    finally:
        with SCAN_THREADS._cond:
            SCAN_THREADS._running -= 1
