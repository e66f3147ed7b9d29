"""One typed error for everything the core refuses, with a machine-readable kind.

Front ends turn it into their own shape: the MCP adapter into ``{"error": kind, ...}``,
the CLI into a red message and a non-zero exit.
"""

from __future__ import annotations

from typing import Any

KINDS = (
    "not-found",
    "invalid-input",
    "feature-disabled",
    "rate-limited",
    "conflict",
    "folder-denied",
    "already-exists",
    "no-index",
)


class KmsError(Exception):
    def __init__(self, kind: str, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.extra = extra

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.kind, "message": self.message, **self.extra}
