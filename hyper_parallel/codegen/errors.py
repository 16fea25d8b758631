"""The one error type of the generator."""

from __future__ import annotations


class CodegenError(Exception):
    """The table, a template or an introspected class is wrong: nothing was written.

    ``problems`` holds one message per problem (each names the table row and line, or the field,
    and says how to fix it); ``str(error)`` joins them.
    """

    def __init__(self, problems: list[str] | str):
        self.problems = [problems] if isinstance(problems, str) else list(problems)
        count = len(self.problems)
        head = "" if count == 1 else f"{count} problems:\n"
        super().__init__(head + "\n".join(f"- {p}" if count > 1 else p for p in self.problems))
