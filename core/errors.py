"""Errors about bad input: they name what is wrong and where."""

from __future__ import annotations


class InputError(Exception):
    """Bad input from a file or the command line: `source:line: problem`."""

    def __init__(self, source: str, problem: str, line: int | None = None) -> None:
        self.source = source
        self.problem = problem
        self.line = line
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {problem}")
