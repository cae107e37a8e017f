"""CI runs what the README says: every test command of .ci/run is printed in the README."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def ci_test_commands(text: str) -> list[str]:
    return [ln.strip() for ln in text.splitlines() if "python3 -m pytest" in ln and
            not ln.lstrip().startswith("#")]  # fmt: skip


def test_every_ci_test_command_is_in_the_readme():
    commands = ci_test_commands((ROOT / ".ci" / "run").read_text())
    assert "python3 -m pytest" in commands
    assert any("SPARSESCOPE_FAST_PATHS=0" in c for c in commands)
    readme = (ROOT / "README.md").read_text()
    missing = [c for c in commands if c not in readme]
    assert not missing, f"the README does not show these CI commands: {missing}"


def test_the_reader_sees_a_missing_command():
    assert ci_test_commands("set -e\n# python3 -m pytest no\npython3 -m pytest -k x\n") == [
        "python3 -m pytest -k x"
    ]
