"""Run every SQL script in sql/ (README examples included) and check its expected results."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import CORPUS, corpus_available, corpus_missing_reason
from datafusion import SessionContext
from slt import run

import delta_datafusion as dd
from delta_datafusion.cli import example_table

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"
SCRIPTS = sorted(SQL_DIR.glob("*.slt"))


def test_sql_scripts_exist():
    names = {p.name for p in SCRIPTS}
    assert "readme_examples.slt" in names, f"no README examples script in {SQL_DIR}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.stem)
def test_sql_script(script: Path):
    text = script.read_text()
    if "${CORPUS}" in text and not corpus_available():
        pytest.skip(corpus_missing_reason())
    ctx = SessionContext()
    dd.register(ctx)
    n = run(ctx, script, {"EXAMPLE": str(example_table()), "CORPUS": str(CORPUS)})
    assert n > 0, f"{script} holds no records"


def test_readme_sql_examples_are_in_the_script():
    """Each SQL statement shown in README.md appears in sql/readme_examples.slt."""
    import re

    def norm(text: str) -> str:
        return re.sub(r"LOCATION '[^']*'", "LOCATION '?'", " ".join(text.split()))

    readme = (SQL_DIR.parent / "README.md").read_text()
    script = norm((SQL_DIR / "readme_examples.slt").read_text())
    blocks = readme.split("```sql")[1:]
    assert blocks, "README.md shows no ```sql examples"
    for block in blocks:
        for stmt in block.split("```")[0].split(";"):
            stmt = norm("\n".join(x for x in stmt.splitlines() if not x.strip().startswith("--")))
            if stmt:
                assert stmt in script, f"README example not covered by sql/readme_examples.slt: {stmt}"
