"""The notes an agent can read whose text looks like instructions planted for it (``server.vault.planted``),
for ``kms doctor``: a person may have pasted a web page that carries them, or an agent wrote them before
kms held such writes for approval. Hidden notes are left out: no agent ever reads them."""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from server.index.notes import VISIBLE
from server.vault.planted import looks_like_instructions


@dataclass(frozen=True)
class PlantedNote:
    vault: str
    path: str
    reasons: list[str]

    def to_json(self) -> dict[str, object]:
        return {"vault": self.vault, "path": self.path, "reasons": self.reasons}


def planted_notes(conn: apsw.Connection) -> list[PlantedNote]:
    """Every visible note that looks planted, by vault and path."""
    found: list[PlantedNote] = []
    for vault, path, title, body in conn.execute(
        f"SELECT v.name, n.path, n.title, n.body FROM notes n JOIN vaults v ON v.id = n.vault_id "
        f"WHERE {VISIBLE} ORDER BY v.name, n.path"
    ):
        reasons = looks_like_instructions(f"{title}\n{body}")
        if reasons:
            found.append(PlantedNote(str(vault), str(path), reasons))
    return found
