"""Path safety: no write lands outside the vault, whatever titles, folders and headings agents send."""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support.writes import Env, make_env, snapshot

from server.activity.changes import TextInserted
from server.config.allowlist import Allowlist
from server.errors import KmsError
from server.vault.files import atomic_write
from server.vault.paths import (
    MAX_TITLE_CHARS,
    ensure_folder,
    is_within,
    resolve_folder,
    resolve_note_file,
    sanitize_title,
)
from server.writes import operations
from server.writes.context import WriteContext, load_note

RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {f"LPT{i}" for i in range(1, 10)}
NASTY = [
    "..",
    ".",
    "",
    "a",
    "b",
    "．．",
    "．",
    "\u2215",
    "\u2044",
    "／",
    "＼",
    "C:",
    "c:",
    "\\",
    "/",
    "\x00",
    " ",
    "\t",
    "\n",
    "link_out",
    "link_in",
    "CON",
    "com1",
    "LPT9",
    "COM¹",
    "~",
    "ａ",
    "\u202e",
    "\u200b",
    "\ufeff",
    "...",
    "a.",
    "a ",
    "é",
    "e\u0301",
    ":",
    "*",
    "?",
    "<",
    ">",
    "|",
    '"',
    "#",
    "^",
    "[",
    "]",
    "\u2025",
    "\u2024",
    "$HOME",
    "%",
]


@pytest.fixture
def world(tmp_path: Path) -> Env:
    """A vault with a symlink out of it and one inside it, plus a folder outside it with a file."""
    env = make_env(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("secret\n")
    (env.root / "sub").mkdir()
    os.symlink(outside, env.root / "link_out")
    os.symlink(env.root / "sub", env.root / "link_in")
    return env


def _outside(env: Env) -> dict[str, str]:
    # the database folder (with kms's lock files) is kms-private; everything else outside the vault is watched
    return snapshot(env.tmp, skip=(env.root, env.db_path.parent))


def _check_stem(stem: str) -> None:
    folded = unicodedata.normalize("NFKC", stem)
    assert stem and len(stem) <= MAX_TITLE_CHARS and len((stem + ".md").encode()) <= 255
    for bad in ("/", "\\", ":", "\x00", "*", "?", '"', "<", ">", "|"):
        assert bad not in stem and bad not in folded
    assert not stem.startswith(".") and not folded.startswith(".")
    assert not stem.endswith((".", " ")) and not folded.endswith((".", " "))
    assert all(unicodedata.category(c) not in ("Cc", "Cs") for c in stem)
    assert stem.split(".")[0].strip().upper() not in RESERVED
    assert unicodedata.normalize("NFKC", stem.split(".")[0]).strip().upper() not in RESERVED


# ----- sanitize_title -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("title", "stem"),
    [
        ("Meeting: 10/2", "Meeting- 10-2"),
        ("a\\b", "a-b"),
        ("..hidden", "hidden"),
        ("...", None),
        ("name. . ", "name"),
        ("CON", "CON_"),
        ("con.txt", "con_.txt"),
        ("COM¹", "COM¹_"),
        ("lpt9 ", "lpt9_"),
        ("ok\u202egnp.exe", "okgnp.exe"),
        ("tab\there\nnew", "tab here new"),
        ("．．／etc／passwd", "-etc-passwd"),
        ("a\u2215b", "a-b"),
        ("Note.md", "Note"),
        ("Café", "Café"),
        ("e\u0301", "é"),
        ("[[link]] #tag ^x", "--link-- -tag -x"),
        ("", None),
        ("\x00\x01", None),
        ("  ", None),
    ],
)
def test_sanitize_examples(title: str, stem: str | None) -> None:
    if stem is None:
        with pytest.raises(KmsError) as e:
            sanitize_title(title)
        assert e.value.kind == "invalid-input"
    else:
        assert sanitize_title(title) == stem


def test_sanitize_length_limits() -> None:
    assert len(sanitize_title("x" * 500)) == MAX_TITLE_CHARS
    emoji = sanitize_title("😀" * 150)
    assert len((emoji + ".md").encode()) <= 255
    assert sanitize_title("a" * 199 + " .b") == "a" * 199


def test_a_title_ending_in_a_character_that_folds_to_a_dot_loses_it() -> None:
    """``⒈`` is "1." once folded (NFKC), as Windows and some sync tools fold names: a trailing one goes like a
    trailing dot (a case hypothesis found)."""
    assert sanitize_title("Step ⒈") == "Step"
    assert sanitize_title("⒈ first") == "⒈ first"
    with pytest.raises(KmsError):
        sanitize_title("⒈")


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(title=st.one_of(st.text(max_size=300), st.lists(st.sampled_from(NASTY), max_size=12).map("".join)))
def test_sanitized_titles_stay_in_the_vault(world: Env, title: str) -> None:
    before = _outside(world)
    try:
        stem = sanitize_title(title)
    except KmsError as e:
        assert e.kind == "invalid-input"
        return
    _check_stem(stem)
    target = world.root / "sub" / (stem + ".md")
    try:
        atomic_write(target, "x\n", create_only=True)
    except KmsError as e:
        assert e.kind == "already-exists"
    assert is_within(target, world.root) and target.parent == world.root / "sub"
    assert _outside(world) == before


# ----- folders ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "folder",
    [
        "..",
        "../x",
        "a/../b",
        "a/..",
        "/etc",
        "/",
        "C:/x",
        "C:",
        "c:x",
        "a\\b",
        "a\x00b",
        "．．",
        "a/．．/b",
        "a\u2215b",
        "a／b",
        "a./b",
        "a /b",
        " a",
        ".obsidian",
        ".trash/x",
        "a//b",
        "con",
        "x/AUX/y",
        "link_out",
        "link_out/x",
        "a\u202eb",
        "a\nb",
        "\u2025",
        "a:b",
    ],
)
def test_bad_folders_refused(world: Env, folder: str) -> None:
    before = _outside(world)
    with pytest.raises(KmsError) as e:
        ensure_folder(world.root, folder)
    assert e.value.kind == "invalid-input"
    assert _outside(world) == before
    assert not (world.root / "x").exists()


@pytest.mark.parametrize("folder", ["", None, "a", "a/b/c", "drafts/", "Café", "link_in", "link_in/deeper", "~x"])
def test_good_folders(world: Env, folder: str | None) -> None:
    path = ensure_folder(world.root, folder)
    assert path.is_dir() and is_within(path, world.root)
    assert resolve_folder(world.root, folder) == path


def test_folder_reuses_nfd_name(world: Env) -> None:
    nfd = unicodedata.normalize("NFD", "Café")
    (world.root / nfd).mkdir()
    assert ensure_folder(world.root, "Café").name == nfd


def test_note_symlink_out_of_vault_refused(world: Env) -> None:
    os.symlink(world.tmp / "outside" / "secret.md", world.root / "evil.md")
    with pytest.raises(KmsError) as e:
        resolve_note_file(world.root, "evil.md")
    assert e.value.kind == "invalid-input"
    for rel in ("../outside/secret.md", "/etc/passwd", "a/./b.md", "link_out/secret.md"):
        with pytest.raises(KmsError):
            resolve_note_file(world.root, rel)


def _folder_strategy() -> st.SearchStrategy[str]:
    seg = st.one_of(st.sampled_from(NASTY), st.text(max_size=8))
    return st.lists(seg, max_size=5).flatmap(
        lambda segs: st.sampled_from(["/", "\\", "／", "\u2215"]).map(lambda sep: sep.join(segs))
    )


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(folder=st.one_of(_folder_strategy(), st.text(max_size=40)))
def test_any_folder_stays_in_the_vault(world: Env, folder: str) -> None:
    before = _outside(world)
    try:
        path = ensure_folder(world.root, folder)
    except KmsError as e:
        assert e.kind == "invalid-input"
    else:
        assert is_within(path, world.root)
        atomic_write(path / "probe.md", "x\n")
        assert is_within(path / "probe.md", world.root)
    assert _outside(world) == before


# ----- the full create / append path ----------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    title=st.one_of(st.text(max_size=60), st.lists(st.sampled_from(NASTY), max_size=8).map("".join)),
    folder=st.one_of(st.none(), _folder_strategy()),
)
def test_create_never_escapes(world: Env, title: str, folder: str | None) -> None:
    before = _outside(world)
    try:
        ctx = WriteContext.for_person(world.conn)
        out = operations.create(ctx, world.vault, title=title, content="hi", folder=folder)
    except KmsError as e:
        assert e.kind in ("invalid-input", "already-exists")
    else:
        path = world.root / out.result["path"]
        assert path.is_file() and is_within(path, world.root)
        assert out.result["noteId"]
    assert _outside(world) == before


HEADINGS_NOTE = (
    "# Top\n\nintro\n\n## Tasks\n- a\n\n```\n## Tasks\n```\n\n## Tasks ##\n\n### Sub\nx\n"
    "## Ünïcode 🚀\n\nSetext\n------\n\n#notaheading\n"
)


@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    heading=st.one_of(
        st.text(max_size=30),
        st.sampled_from(
            ["Tasks", "## Tasks", "Top", "# Top", "Sub", "Setext", "ünïcode 🚀", "../x", "#notaheading", "###", ""]
        ),
    )
)
def test_append_under_any_heading(world: Env, heading: str) -> None:
    if not (world.root / "h.md").exists():
        world.note("h.md", HEADINGS_NOTE)
    note, vault = load_note(world.conn, "h.md")
    before_outside = _outside(world)
    before = world.read("h.md")
    try:
        out = operations.append(WriteContext.for_person(world.conn), vault, note, content="added line", heading=heading)
    except KmsError as e:
        assert e.kind == "invalid-input"
        assert world.read("h.md") == before
    else:
        after = world.read("h.md")
        change = out.change
        assert isinstance(change, TextInserted) and change.path == "h.md"
        off, ins = change.offset, change.text
        assert after[off : off + len(ins)] == ins
        assert after[:off] + after[off + len(ins) :] == before
    assert _outside(world) == before_outside


def test_allowlist_cannot_be_escaped_by_symlink(world: Env) -> None:
    (world.root / "drafts").mkdir()
    os.symlink(world.root / "sub", world.root / "drafts" / "alias")
    with pytest.raises(KmsError) as e:
        ctx = WriteContext.for_person(world.conn, allowlist=Allowlist(["drafts/*"]))
        operations.create(ctx, world.vault, title="x", folder="drafts/alias")
    assert e.value.kind == "folder-denied"
    assert not (world.root / "sub" / "x.md").exists()
