"""flashcl.check(): the flashcl-check program run for the caller."""
import io

import pytest

import flashcl


def test_quick_check_passes_with_a_line_per_check():
    out = io.StringIO()
    result = flashcl.check(quick=True, out=out)
    checks = [line for line in result.lines if line.startswith("[")]
    assert result and result.returncode == 0, "\n".join(result.lines)
    assert out.getvalue().splitlines() == result.lines
    assert len(checks) == 9 and all(line.endswith(" ok") for line in checks)
    assert result.lines[-1].startswith("PASS: all 9 checks")


def test_a_missing_device_is_a_failed_run_not_an_exception():
    result = flashcl.check(device="99:0", out=None)
    assert not result and result.returncode == 2
    assert any("99:0" in line for line in result.lines)


def test_bad_device_spec_and_missing_program(monkeypatch):
    with pytest.raises(flashcl.ArgumentError):
        flashcl.check(device="gpu")
    monkeypatch.setenv("FLASHCL_CHECK", "/nonexistent/flashcl-check")
    with pytest.raises(FileNotFoundError, match="FLASHCL_CHECK"):
        flashcl.check()
