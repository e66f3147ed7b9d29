"""A Dendron workspace read as Dendron reads it (issue 29): ``dendron.yml`` names the vaults, and a
``[[dendron://name/note]]`` link resolves into the kms vault (and folder) holding that Dendron vault,
whatever the kms vault is called; a workspace added by its root or by its vault folders; the reader of
``dendron.yml`` never fails a vault's registration."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.dialect_vaults import backlink_paths, checkout
from support.vaults import write

from server.errors import KmsError
from server.index.indexer import index_vault
from server.index.link_vaults import named_vault, workspace_view
from server.store.db import connect, rows
from server.store.migrations import applied, migrate
from server.vault import dendron
from server.vault.dialects import detect
from server.vault.registry import add_vault, get_vault
from server.writes.link_ops import in_vault


def targets(conn: apsw.Connection, vault: str, path: str) -> list[tuple[str | None, str | None, str | None]]:
    """Each link of ``vault:path``: (the vault it names, the kms vault and path it resolves to)."""
    return [
        (r["named"], r["vault"], r["dst"])
        for r in rows(
            conn,
            """SELECT l.target_vault AS named, dv.name AS vault, d.path AS dst FROM links l
               JOIN notes s ON s.rid = l.src_rid JOIN vaults sv ON sv.id = s.vault_id
               LEFT JOIN notes d ON d.rid = l.dst_rid LEFT JOIN vaults dv ON dv.id = d.vault_id
               WHERE sv.name = ? AND s.path = ? ORDER BY l.ord""",
            (vault, path),
        )
    ]


def tags(conn: apsw.Connection) -> set[str]:
    return {r["tag"] for r in rows(conn, "SELECT DISTINCT tag FROM note_tags")}


# --- the reader -----------------------------------------------------------------------------------------


def test_workspace_vaults_give_each_vault_its_name_and_folder(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    read = dendron.read_config(ws / "dendron.yml")
    assert read.problem is None and read.root == ws
    assert [(v.name, v.fs_path, v.notes) for v in read.vaults] == [
        ("acme.handbook", "main", ws / "main"),
        ("acme.team", "team/shared", ws / "team" / "shared"),
    ]


def test_the_older_top_level_vaults_and_dendrons_own_path_rules(tmp_path: Path) -> None:
    config = write(
        tmp_path / "dendron.yml",
        "version: 1\nvaults:\n  - fsPath: vault\n  - fsPath: notes/work\n    name: work\n"
        "  - fsPath: vault\n    seed: dendron.templates\n  - fsPath: sc\n    selfContained: true\n    name: sc\n"
        "  - fsPath: remote\n    workspace: other-ws\n    name: far\n",
    )
    read = dendron.read_config(config)
    assert read.problem is None
    assert [(v.name, v.notes.relative_to(tmp_path).as_posix()) for v in read.vaults] == [
        ("vault", "vault"),  # no name: its fsPath's last part
        ("work", "notes/work"),
        ("dendron.templates", "seeds/dendron.templates/vault"),  # a seed is named by its seed
        ("sc", "sc/notes"),  # a self-contained vault keeps its notes in notes/
        ("far", "other-ws/remote"),
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "is not a mapping of settings"),
        ("version: 5\nworkspace:\n  dendronVersion: 0.1\n", "lists no vaults (workspace.vaults)"),
        ("workspace:\n  vaults: []\n", "lists no vaults"),
        ("workspace: [unclosed\n", "is not valid YAML"),
        ("- just\n- a list\n", "is not a mapping of settings"),
        ("workspace:\n  vaults:\n    - name: nameless\n", "skipped a vault without an fsPath"),
    ],
)
def test_a_dendron_yml_that_cannot_be_read_is_a_problem_never_an_error(tmp_path: Path, text: str, why: str) -> None:
    read = dendron.read_config(write(tmp_path / "dendron.yml", text))
    assert read.vaults == () and read.problem is not None
    assert read.problem.startswith(f"{tmp_path / 'dendron.yml'}: ") and why in read.problem


def test_a_bad_entry_is_skipped_and_the_good_ones_kept(tmp_path: Path) -> None:
    config = write(
        tmp_path / "dendron.yml",
        "workspace:\n  vaults:\n    - fsPath: a\n    - 42\n    - fsPath: b\n      name: a\n    - fsPath: c\n",
    )
    read = dendron.read_config(config)
    assert [v.name for v in read.vaults] == ["a", "c"]
    assert read.problem is not None and "skipped a vault without an fsPath, a second vault named 'a'" in read.problem


def test_find_by_root_by_vault_folder_and_a_workspace_that_does_not_list_the_folder(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    by_root = dendron.find(ws)
    assert by_root is not None and by_root.at_root and by_root.is_dendron
    assert by_root.inside == (("acme.handbook", "main"), ("acme.team", "team/shared"))
    by_folder = dendron.find(ws / "team" / "shared")  # dendron.yml two folders up
    assert by_folder is not None and by_folder.is_dendron and not by_folder.at_root
    assert by_folder.inside == (("acme.team", ""),) and by_folder.workspace.root == ws
    (ws / "loose").mkdir()
    stray = dendron.find(ws / "loose")
    assert stray is not None and not stray.is_dendron
    assert stray.workspace.problem is not None and "does not list this folder" in stray.workspace.problem
    assert dendron.find(tmp_path) is None


def test_detect_reads_a_vault_folder_of_a_workspace_as_dendron(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    assert detect(ws).name == detect(ws / "main").name == detect(ws / "team" / "shared").name == "dendron"
    (ws / "loose").mkdir()
    assert detect(ws / "loose").name == "obsidian"
    write(ws / "dendron.yml", "workspace: [broken\n")
    assert detect(ws / "main").name == "obsidian"  # cannot tell: `kms vault add` says why
    assert detect(ws).name == "dendron"  # dendron.yml in the folder itself


# --- links and backlinks, added both ways -------------------------------------------------------------------

EXPECTED_BACKLINKS = {  # (Dendron vault, note) -> its backlinks as (Dendron vault, note)
    ("handbook", "community.roles.md"): [("handbook", "root.md"), ("team", "glossary.md")],
    ("team", "community.roles.md"): [("handbook", "community.roles.md"), ("team", "glossary.terms.md")],
    ("team", "glossary.md"): [("handbook", "root.md"), ("team", "glossary.terms.md")],
}


def check_workspace(conn: apsw.Connection, where: dict[str, tuple[str, str]]) -> None:
    """Links, backlinks and tags as Dendron shows them; ``where``: Dendron vault -> (kms vault, folder)."""

    def at(v: str, note: str) -> tuple[str, str]:
        kms, folder = where[v]
        return kms, folder + note

    assert targets(conn, *at("handbook", "community.roles.md")) == [
        ("acme.team", *at("team", "community.roles.md")),  # not the handbook's note of that name
        ("acme.archive", None, None),  # a vault no dendron.yml names: unresolved
    ]
    assert targets(conn, *at("team", "glossary.md")) == [
        ("acme.handbook", *at("handbook", "community.roles.md")),
        (None, *at("team", "glossary.terms.md")),
    ]
    assert targets(conn, *at("handbook", "root.md"))[1] == ("acme.team", *at("team", "glossary.md"))
    for (v, note), linking in EXPECTED_BACKLINKS.items():
        kms, path = at(v, note)
        found = [
            (r["vault"], r["path"])
            for r in rows(
                conn,
                """SELECT sv.name AS vault, s.path FROM links l JOIN notes s ON s.rid = l.src_rid
                   JOIN vaults sv ON sv.id = s.vault_id JOIN notes d ON d.rid = l.dst_rid
                   JOIN vaults dv ON dv.id = d.vault_id WHERE dv.name = ? AND d.path = ? ORDER BY 1, 2""",
                (kms, path),
            )
        ]
        assert found == sorted(at(*b) for b in linking), (v, note)
    assert tags(conn) == {"role.bugcatcher", "role.docs", "team.lead"}


def test_a_workspace_added_by_its_root_is_one_vault_holding_both(conn: apsw.Connection, tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    vault = add_vault(conn, ws, "acme-notes")
    assert vault.dialect == "dendron"
    assert not index_vault(conn, vault).errors
    check_workspace(conn, {"handbook": ("acme-notes", "main/"), "team": ("acme-notes", "team/shared/")})
    assert backlink_paths(conn, "acme-notes", "team/shared/community.roles.md") == [
        "main/community.roles.md",
        "team/shared/glossary.terms.md",
    ]
    assert named_vault(conn, vault.id, "acme.team") == (vault.id, "team/shared/")
    view = workspace_view(conn, vault)
    assert view is not None and view.at_root and view.problem is None
    assert [(m.name, m.vault, m.folder) for m in view.vaults] == [
        ("acme.handbook", "acme-notes", "main"),
        ("acme.team", "acme-notes", "team/shared"),
    ]


@pytest.mark.parametrize("order", [("main", "team/shared"), ("team/shared", "main")])
def test_a_workspace_added_by_its_vault_folders_links_across_them(
    conn: apsw.Connection, tmp_path: Path, order: tuple[str, str]
) -> None:
    """Whichever folder comes first, a link into the other resolves once that one is added."""
    ws = checkout("dendron-workspace", tmp_path / "ws")
    names = {"main": "hb", "team/shared": "shared-stuff"}
    first = add_vault(conn, ws / order[0], names[order[0]])
    assert first.dialect == "dendron" and not index_vault(conn, first).errors
    other = "acme.team" if order[0] == "main" else "acme.handbook"
    assert named_vault(conn, first.id, other) is None  # its vault is not registered yet
    view = workspace_view(conn, first)
    assert view is not None and not view.at_root
    own = "acme.handbook" if order[0] == "main" else "acme.team"
    assert {m.name: m.vault for m in view.vaults} == {own: names[order[0]], other: None}
    second = add_vault(conn, ws / order[1], names[order[1]])
    assert not index_vault(conn, second).errors
    check_workspace(conn, {"handbook": ("hb", ""), "team": ("shared-stuff", "")})
    hb = get_vault(conn, "hb")
    view = workspace_view(conn, hb)
    assert view is not None and [(m.name, m.vault, m.folder) for m in view.vaults] == [
        ("acme.handbook", "hb", ""),
        ("acme.team", "shared-stuff", ""),
    ]


def test_an_edited_dendron_yml_is_followed_at_the_next_index(conn: apsw.Connection, tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    vault = add_vault(conn, ws, "acme-notes")
    index_vault(conn, vault)
    yml = (ws / "dendron.yml").read_text().replace("acme.team", "acme.crew")
    write(ws / "dendron.yml", yml)
    index_vault(conn, get_vault(conn, "acme-notes"))  # no note changed: dendron.yml alone
    assert targets(conn, "acme-notes", "team/shared/glossary.md")[0][1:] == ("acme-notes", "main/community.roles.md")
    assert targets(conn, "acme-notes", "main/root.md")[1] == ("acme.team", None, None)  # no such vault now
    write(ws / "dendron.yml", yml.replace("acme.crew", "acme.team"))
    index_vault(conn, get_vault(conn, "acme-notes"))
    assert targets(conn, "acme-notes", "main/root.md")[1] == ("acme.team", "acme-notes", "team/shared/glossary.md")


def test_a_link_target_naming_a_dendron_vault_this_vault_holds(conn: apsw.Connection, tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    whole = add_vault(conn, ws, "acme-notes")
    assert in_vault(conn, whole, "dendron://acme.team/glossary") == "dendron://acme.team/glossary"
    conn.execute("DELETE FROM vaults")
    hb = add_vault(conn, ws / "main", "hb")
    add_vault(conn, ws / "team" / "shared", "shared-stuff")
    assert in_vault(conn, hb, "dendron://acme.handbook/community.roles") == "community.roles"
    with pytest.raises(KmsError, match="names vault 'acme.team'"):
        in_vault(conn, hb, "dendron://acme.team/glossary")


def test_upgrade_to_m032_reads_the_workspace_of_a_vault_registered_before(tmp_path: Path) -> None:
    """A vault folder registered before m032 (its dendron.yml never read, its name not the Dendron one)
    gains its Dendron name at its next index, and the links naming it resolve."""
    ws = checkout("dendron-workspace", tmp_path / "ws")
    path = tmp_path / "m029.db"
    old = apsw.Connection(str(path))
    migrate(old, upto="m029_staged_why")
    for name, folder in (("hb", "main"), ("shared-stuff", "team/shared")):
        old.execute(
            "INSERT INTO vaults(name, root, added_at, dialect) VALUES (?, ?, 1, 'dendron')", (name, str(ws / folder))
        )
    old.close()
    conn = connect(path)
    assert "m032_dendron_vaults" in applied(conn)
    for name in ("hb", "shared-stuff"):
        assert not index_vault(conn, get_vault(conn, name)).errors
    check_workspace(conn, {"handbook": ("hb", ""), "team": ("shared-stuff", "")})
    conn.close()
