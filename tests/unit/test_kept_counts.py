"""The counts kept as the index changes (m030, m042, ``server.store.kept_counts``): after every kind of
change (adds, edits, an attachment a link names appearing and going, deletes, renames, moves of a note and
of a folder, hides, privacy rules, a second vault, a vault removed) they equal a recount over the whole
index, and what orientation answers from them equals what the whole-index queries it replaced answer:
hidden notes never counted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
from support.vaults import write

from server.index import listing, orientation
from server.index.incremental import reindex_file
from server.index.indexer import index_vault, remove_vault
from server.index.notes import set_hidden
from server.store.db import rows, scalar, write_tx
from server.vault.registry import add_vault, get_vault
from server.writes.context import WriteContext, load_note
from server.writes.folders import move_folder
from server.writes.organize import move

HIDDEN = "(SELECT rid FROM notes WHERE hidden_at IS NOT NULL)"
VAULT = "(SELECT rid FROM notes WHERE vault_id = ?)"


def recounted(conn: apsw.Connection, vault_id: int | None) -> dict[str, Any]:
    """What orientation answered before the counts were kept: each aggregate over the whole index."""
    p: tuple[Any, ...] = (vault_id,) if vault_id is not None else ()
    tags = rows(
        conn,
        f"""SELECT t.tag, count(*) AS count FROM note_tags t WHERE t.rid NOT IN {HIDDEN}
            {f"AND t.rid IN {VAULT}" if p else ""} GROUP BY t.tag ORDER BY count DESC, t.tag""",
        p,
    )
    linked = [
        (r[0], r[1])
        for r in conn.execute(
            f"""SELECT n.path, count(DISTINCT l.src_rid) AS b FROM links l JOIN notes n ON n.rid = l.dst_rid
                WHERE l.src_rid != l.dst_rid AND l.src_rid NOT IN {HIDDEN} AND l.dst_rid NOT IN {HIDDEN}
                {f"AND l.dst_rid IN {VAULT}" if p else ""} GROUP BY l.dst_rid ORDER BY b DESC, l.dst_rid""",
            p,
        )
    ]
    missing = [
        (r[0], r[1], conn.execute("SELECT id FROM notes WHERE rid = ?", (r[2],)).fetchall()[0][0])
        for r in conn.execute(
            f"""SELECT min(l.target), count(*) AS c, min(l.src_rid) FROM links l
                WHERE l.dst_rid IS NULL AND l.dst_file IS NULL AND l.src_rid NOT IN {HIDDEN}
                {f"AND l.src_rid IN {VAULT}" if p else ""}
                GROUP BY l.target_key ORDER BY c DESC, l.target_key""",
            p,
        )
    ]
    folders: dict[tuple[str, int], int] = {}
    for vid, folder, n in conn.execute(
        f"""SELECT vault_id, folder, count(*) FROM notes WHERE hidden_at IS NULL AND folder != ''
            {"AND vault_id = ?" if p else ""} GROUP BY vault_id, folder""",
        p,
    ):
        key = (folder.split("/", 1)[0], vid)
        folders[key] = folders.get(key, 0) + n
    return {"tags": tags, "linked": linked, "missing": missing, "folders": sorted(folders.values())}


def answered(conn: apsw.Connection, vault_id: int | None) -> dict[str, Any]:
    top, total = orientation.unresolved(conn, vault_id, 10_000)
    assert total == sum(u["links"] for u in top)
    return {
        "tags": listing.list_tags(conn, vault_id)["tags"],
        "linked": [(m["path"], m["backlinks"]) for m in orientation.most_linked(conn, vault_id, 10_000)],
        "missing": [(u["target"], u["links"], u["fromNoteId"]) for u in top],
        "folders": sorted(f["notes"] for f in orientation.subfolders(conn, "", vault_id)[0]),
    }


def check(conn: apsw.Connection) -> None:
    """The kept counts against the recount, for every vault and for all of them."""
    scopes = [None, *(r[0] for r in conn.execute("SELECT id FROM vaults"))]
    for vault_id in scopes:
        assert answered(conn, vault_id) == recounted(conn, vault_id), vault_id


def note(title: str, tags: str, links: list[str]) -> str:
    return f"---\ntags: [{tags}]\n---\n# {title}\n\n" + "\n".join(f"See [[{link}]]." for link in links) + "\n"


def test_the_kept_counts_equal_a_recount_after_every_kind_of_change(
    indexed: apsw.Connection, vault_dir: Path, tmp_path: Path
) -> None:
    conn = indexed
    check(conn)  # after a cold index (triggers off, recounted at the end)
    vault = get_vault(conn, "sample")
    assert scalar(conn, "SELECT count(*) FROM kept_backlinks") > 0

    # adds: tags, a link twice, a link to itself, links to notes that do not exist yet
    write(vault_dir / "hub" / "Hub.md", note("Hub", "hub, shared", ["Hub", "Spoke One", "Nowhere"]))
    for i in range(4):
        write(vault_dir / "spokes" / f"Spoke {i}.md", note(f"Spoke {i}", "spoke, shared", ["Hub", "Hub", "Missing"]))
    index_vault(conn, vault)
    check(conn)

    # edits: tags and links change; a note whose title a forward link names appears
    write(vault_dir / "spokes" / "Spoke 1.md", note("Spoke One", "edited", ["Hub", "Nowhere", "Nowhere"]))
    reindex_file(conn, vault, "spokes/Spoke 1.md")
    check(conn)
    write(vault_dir / "Missing.md", note("Missing", "found", []))
    index_vault(conn, vault)
    check(conn)

    # a link to an attachment: missing until the file appears, missing again when it goes
    write(vault_dir / "hub" / "Plans.md", note("Plans", "plans", ["diagram.png", "Nowhere"]))
    index_vault(conn, vault)
    check(conn)
    assert ("diagram.png", 1) in [(u["target"], u["links"]) for u in orientation.unresolved(conn, None, 100)[0]]
    (vault_dir / "hub" / "diagram.png").write_bytes(b"\x89PNG")
    index_vault(conn, vault)
    check(conn)
    assert "diagram.png" not in [u["target"] for u in orientation.unresolved(conn, None, 100)[0]]
    (vault_dir / "hub" / "diagram.png").unlink()
    index_vault(conn, vault)
    check(conn)
    assert "diagram.png" in [u["target"] for u in orientation.unresolved(conn, None, 100)[0]]

    # hides by hand, of the hub (the most linked) and of a linking note; then one shown again
    set_hidden(conn, "hub/Hub.md", True)
    check(conn)
    set_hidden(conn, "spokes/Spoke 2.md", True)
    check(conn)
    set_hidden(conn, "hub/Hub.md", False)
    check(conn)

    # a privacy rule hides a folder; an edit of a hidden note; a hidden note's file deleted
    write(vault_dir / ".kmsignore", "spokes/\n")
    index_vault(conn, vault)
    assert scalar(conn, "SELECT count(*) FROM notes WHERE hidden_at IS NOT NULL") >= 4
    check(conn)
    write(vault_dir / "spokes" / "Spoke 3.md", note("Spoke 3", "spoke, secret", ["Hub", "Secret target"]))
    index_vault(conn, vault)
    check(conn)
    (vault_dir / "spokes" / "Spoke 3.md").unlink()
    index_vault(conn, vault)
    check(conn)
    (vault_dir / ".kmsignore").unlink()
    index_vault(conn, vault)
    check(conn)

    # a rename on disk (same bytes), a delete, a move by kms, a folder moved by kms
    (vault_dir / "spokes" / "Spoke 0.md").rename(vault_dir / "hub" / "Spoke 0.md")
    index_vault(conn, vault)
    check(conn)
    (vault_dir / "Missing.md").unlink()
    index_vault(conn, vault)
    check(conn)
    ctx = WriteContext.for_person(conn)
    ref, v = load_note(conn, "hub/Spoke 0.md")
    move(ctx, v, ref, folder="archive/old")
    check(conn)
    move_folder(ctx, v, "spokes", to="archive")
    check(conn)

    # a second vault, indexed cold beside the first; then the first removed
    other = tmp_path / "other"
    for i in range(3):
        write(other / "deep" / "er" / f"O{i}.md", note(f"O{i}", "other, shared", ["O0", "Nope"]))
    index_vault(conn, add_vault(conn, other, "other"))
    check(conn)
    remove_vault(conn, "sample")
    check(conn)
    assert conn.execute("SELECT count(*) FROM kept_folders WHERE vault_id = ?", (vault.id,)).fetchall() == [(0,)]


def test_hidden_notes_never_reach_the_counts(conn: apsw.Connection, tmp_path: Path) -> None:
    """A tag only hidden notes carry, a hidden hub, a hidden note's missing link and a folder of hidden
    notes are nowhere in what orientation answers."""
    root = tmp_path / "v"
    write(root / "Hub.md", note("Hub", "open", []))
    write(root / "private" / "Secret.md", note("Secret", "secret-tag", ["Hub", "Secret plan"]))
    write(root / "A.md", note("A", "open", ["Secret", "Hub"]))
    write(root / "B.md", note("B", "open", ["Secret"]))
    write(root / "private" / "Rule.md", "---\nvisibility: private\ntags: [secret-tag]\n---\n[[Hub]] [[Rule plan]]\n")
    vault = add_vault(conn, root, "v")
    index_vault(conn, vault)  # cold: the note a rule hides is judged as it is read, the counts recounted after
    check(conn)
    set_hidden(conn, "private/Secret.md", True)
    check(conn)
    tags = [t["tag"] for t in listing.list_tags(conn)["tags"]]
    assert "secret-tag" not in tags and "open" in tags
    assert [m["path"] for m in orientation.most_linked(conn)] == ["Hub.md"]
    assert orientation.most_linked(conn)[0]["backlinks"] == 1  # A only: the hidden note's link is not counted
    assert orientation.unresolved(conn) == ([], 0)  # "Secret plan" is named by a hidden note only
    assert orientation.subfolders(conn, "") == ([], 0)


def test_a_counting_trigger_error_rolls_the_whole_change_back(indexed: apsw.Connection) -> None:
    """The counts change in the index change's own transaction: a change rolled back leaves them as they were."""
    before = {t: sorted(indexed.execute(f"SELECT * FROM {t}").fetchall()) for t in ("kept_folders", "kept_tags")}
    try:
        with write_tx(indexed):
            indexed.execute("UPDATE notes SET hidden_at = 1 WHERE hidden_at IS NULL")
            raise RuntimeError("stop")
    except RuntimeError:
        pass
    assert {t: sorted(indexed.execute(f"SELECT * FROM {t}").fetchall()) for t in before} == before
    check(indexed)


def test_a_scoped_session_counts_only_the_backlinks_from_its_own_vaults(conn: apsw.Connection, tmp_path: Path) -> None:
    """The kept backlink counts hold sources in every vault (a ``dendron://`` link crosses vaults); a session
    scoped to one vault ranks its hubs by the links from its own notes, exactly as a recount would."""
    from server.vault.scope import VaultScope

    write(tmp_path / "a" / "hub.md", "# Hub\n")
    write(tmp_path / "a" / "local.md", "# Local\n")
    for i in range(2):
        write(tmp_path / "a" / f"a{i}.md", f"# A{i}\n\n[[local]]\n" + ("[[hub]]\n" if i == 0 else ""))
    for i in range(3):  # another vault's notes link to a's hub by its vault's name
        write(tmp_path / "b" / f"b{i}.md", f"# B{i}\n\n[[dendron://a/hub]]\n")
    a = add_vault(conn, tmp_path / "a", "a")
    index_vault(conn, a)
    index_vault(conn, add_vault(conn, tmp_path / "b", "b"))
    everywhere = {r["path"]: r["backlinks"] for r in orientation.most_linked(conn)}
    assert everywhere == {"hub.md": 4, "local.md": 2}, everywhere  # the cross-vault links resolved
    scoped = orientation.most_linked(conn, VaultScope.of(a.id))
    assert [(r["path"], r["backlinks"]) for r in scoped] == [("local.md", 2), ("hub.md", 1)]
    assert [r["path"] for r in orientation.most_linked(conn, VaultScope.of(a.id), limit=1)] == ["local.md"]


def test_status_counts_what_an_agent_sees(conn: apsw.Connection, tmp_path: Path) -> None:
    """``kms status``'s tags, links, unresolved and ambiguous links are those of visible notes, as ``kms tags``
    and ``kms unresolved`` count them; a link to an attachment that exists is no unresolved one."""
    root = tmp_path / "q"
    write(
        root / "private" / "a.md",
        "---\nprivate: true\ntags: [secret-a]\n---\n[[Missing Thing]] [[Secret X]] [[Twin]]\n",
    )
    write(root / "z.md", "[[Missing Thing]] and [[doc.pdf]]\n")
    write(root / "one" / "Twin.md", "# Twin\n")
    write(root / "two" / "Twin.md", "# Twin\n")
    (root / "doc.pdf").write_bytes(b"%PDF")
    index_vault(conn, add_vault(conn, root, "q"))
    status = listing.status(conn)
    assert (status["tags"], status["links"], status["unresolvedLinks"], status["attachmentLinks"]) == (0, 2, 1, 1)
    assert status["ambiguous"] == [] and status["ambiguousLinks"] == 0  # only the hidden note names the twins
    assert status["unresolvedLinks"] == orientation.unresolved(conn)[1]
