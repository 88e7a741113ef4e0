"""README.md's Python examples and command lines, run as written on the bundled example table, so
that a change of the API or the CLI that leaves them wrong fails here (its SQL examples are run by
test_sql_scripts.py). ``path/to/trips`` stands for that table, as the README says; the folder
catalog's ``s3://bucket/warehouse`` for a local folder holding a copy of it (no network)."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from delta_datafusion import cli

README = Path(__file__).resolve().parents[1] / "README.md"
EXAMPLE = str(cli.example_table())


def _blocks(language: str) -> list[str]:
    """The README's fenced code blocks of ``language``, in order."""
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.M | re.S)


def _command_lines() -> list[str]:
    """The ``delta-datafusion ...`` lines of the README's shell blocks (not the two commands that
    install the package)."""
    return [
        line
        for block in _blocks("bash")
        for line in block.splitlines()
        if line.startswith("delta-datafusion ")
    ]


def test_the_readme_shows_python_examples_and_command_lines():
    assert len(_blocks("python")) == 3
    assert len(_command_lines()) >= 5


def test_python_examples_run_as_written(tmp_path: Path, capfd):
    warehouse = tmp_path / "warehouse"
    shutil.copytree(EXAMPLE, warehouse / "trips")
    use, without_datafusion, parallel = _blocks("python")
    use = use.replace("s3://bucket/warehouse", str(warehouse))
    namespace: dict = {}
    for block in (use, without_datafusion, parallel):  # the later blocks go on from `snap`
        code = block.replace("path/to/trips", EXAMPLE)
        exec(compile(code, str(README), "exec"), namespace)
    printed = capfd.readouterr().out
    assert "DeltaScan: table=trips version=5 files_total=4 after_partition_pruning=1" in printed
    assert "| 130      |" in printed  # the folder catalog's count(*) of lake.default.trips
    assert namespace["scan"].to_table().num_rows == 40
    assert namespace["result"].__class__.__name__ == "Done"  # no checkpoint: nothing left for workers


@pytest.mark.parametrize("line", _command_lines())
def test_command_lines_run_as_written(capsys, line: str):
    argv = shlex.split(line.replace("path/to/trips", EXAMPLE))[1:]
    assert cli.main(argv) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.strip() and "error" not in out, out
