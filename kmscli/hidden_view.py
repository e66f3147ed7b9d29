"""What the CLI shows of hidden notes: by default what an agent would see (hidden notes left out of
search hits, write records and the status); with ``--include-hidden`` everything, each hidden note
marked with the rule that hides it (``frontmatter:private``, ``folder:journal/**``, ``kms hide``...)."""

from __future__ import annotations

from typing import Annotated, Any

import apsw
import typer

from server.index.privacy import hidden_notes

IncludeHiddenOpt = Annotated[
    bool,
    typer.Option(
        "--include-hidden",
        help="Also show hidden notes (left out by default, as agents never see them), "
        "each marked with the rule that hides it.",
    ),
]


class HiddenView:
    """The hidden notes (few: a partial index holds them), by id and by vault and path."""

    def __init__(self, conn: apsw.Connection, include: bool) -> None:

        self.include = include
        self.by_id: dict[str, str] = {}
        self.by_path: dict[tuple[str, str], str] = {}
        for n in hidden_notes(conn):
            why = "; ".join(n["why"]) or "hidden"
            self.by_id[n["noteId"]] = why
            self.by_path[(n["vault"], n["path"])] = why

    def why(self, note_id: str | None = None, vault: str | None = None, path: str | None = None) -> str | None:
        """The rule hiding this note, or None when an agent sees it."""
        if note_id and note_id in self.by_id:
            return self.by_id[note_id]
        if vault and path:
            return self.by_path.get((vault, path))
        return None

    def shown(
        self, items: list[dict[str, Any]], id_key: str = "noteId", vault_key: str = "vault", path_key: str = "path"
    ) -> list[dict[str, Any]]:
        """``items`` without the hidden notes' ones, or (``--include-hidden``) each marked ``hidden``."""
        out = []
        for item in items:
            why = self.why(item.get(id_key), item.get(vault_key), item.get(path_key))
            if why is None:
                out.append(item)
            elif self.include:
                out.append({**item, "hidden": why})
        return out

    def status(self, data: dict[str, Any]) -> dict[str, Any]:
        """``kms status``: flagged notes and the candidates of ambiguous links, as for ``shown``."""
        data["flagged"] = self.shown(data["flagged"])
        ambiguous = []
        for a in data["ambiguous"]:
            candidates = []
            for path in a["candidates"]:
                why = self.why(vault=a["vault"], path=path)
                if why is None:
                    candidates.append(path)
                elif self.include:
                    candidates.append(f"{path} (hidden: {why})")
            ambiguous.append({**a, "candidates": candidates})
        data["ambiguous"] = ambiguous
        return data


def mark(item: dict[str, Any]) -> str:
    """The text mark of a hidden item in a table or a line ("" for a visible one)."""
    return f" · HIDDEN ({item['hidden']})" if item.get("hidden") else ""
