"""Figures of the container tests, printed at the end of the run (CI's log keeps them)."""

from __future__ import annotations

from typing import Any

FIGURES: dict[str, str] = {}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FIGURES:
        terminalreporter.write_sep("-", "container image")
        for name, value in FIGURES.items():
            terminalreporter.write_line(f"{name}: {value}")
