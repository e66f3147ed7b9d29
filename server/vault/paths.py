"""Path safety for the write tools: no write may ever land outside the vault.

Agents choose titles and folders, so every name they send is hostile until
proven otherwise. Two different jobs live here:

* ``sanitize_title`` *repairs* a title into a usable file-name stem (people type
  "Meeting: 10/2" and expect a note, not an error).
* ``resolve_folder`` / ``resolve_note_file`` *refuse* anything that is not plainly
  a path inside the vault: repairing a path could silently put a note somewhere
  the agent did not mean.

Both look at the NFKC form of each name as well as the raw one, because some
layer (a sync tool, Windows, a future normaliser) may fold fullwidth ``．．`` into
``..`` or ``／`` into ``/``. Containment is finally checked on real paths
(``os.path.realpath``) so a symlink inside the vault cannot lead out of it.
"""

from __future__ import annotations

import itertools
import os
import re
import stat
import unicodedata
from pathlib import Path

from server.errors import KmsError

MAX_TITLE_CHARS = 200
# A file name is at most 255 bytes on common file systems; leave room for ".md".
MAX_NAME_BYTES = 250
NOTE_SUFFIX = ".md"  # what a new note's file name ends in; ``is_note_path`` says what counts as a note
TRASH = ".trash"  # the vault's trash folder (Obsidian's convention): kms_trash moves notes there

# Characters Windows forbids in names plus those that break Obsidian [[links]].
_TITLE_FORBIDDEN = set('<>:"/\\|?*#^[]')
# Look-alikes of the path separators that NFKC does not fold (U+2215 DIVISION SLASH, ...).
_SLASH_LIKE = set("\u2215\u2044\u29f8\u29f9\u2571\u2572\u29f5\u244a\u2cdc")
_SEGMENT_FORBIDDEN = set('<>:"/\\|?*\x00') | _SLASH_LIKE
# Invisible format characters that spoof names (bidi overrides, zero-width space, BOM, soft hyphen).
# ZWJ/ZWNJ (U+200C/U+200D) stay: emoji and several scripts need them.
_KEEP_FORMAT = {"\u200c", "\u200d"}
_RESERVED = {"CON", "PRN", "AUX", "NUL"} | {f"COM{i}" for i in range(1, 10)} | {f"LPT{i}" for i in range(1, 10)}
_DRIVE = re.compile(r"^[A-Za-z]:")


def _realpath(path: str | os.PathLike[str]) -> str:
    """``os.path.realpath`` that survives a link removed while it is being read (it then raises a
    raw ``FileNotFoundError``): tried again, then a typed ``conflict``."""
    for _ in range(3):
        try:
            return os.path.realpath(path)
        except OSError:
            continue
    raise KmsError(
        "conflict",
        f"{os.fspath(path)!r} kept changing (a folder moved or swapped for a link) while "
        "kms resolved it; nothing was written, try again",
    )


def _nfkc(s: str) -> str:
    return unicodedata.normalize("NFKC", s)


def _is_invisible(ch: str) -> bool:
    cat = unicodedata.category(ch)
    return cat in ("Cc", "Cs") or (cat == "Cf" and ch not in _KEEP_FORMAT)


def _is_dotlike(ch: str) -> bool:
    return ch == "." or _nfkc(ch).startswith(".")


def _is_reserved(stem: str) -> bool:
    """Windows reserves CON, COM1, ... whatever follows the first dot (and folds superscript digits)."""
    base = stem.split(".", 1)[0].rstrip(" ")
    return _nfkc(base).upper() in _RESERVED


def _ends_badly(ch: str) -> bool:
    """A last character that is, or folds (NFKC) to something ending in, a dot or a space: ``⒈`` is "1."."""
    folded = _nfkc(ch)
    return ch.isspace() or folded[-1:] == "." or folded[-1:].isspace()


def _strip_edges(s: str) -> str:
    """No leading dots (hidden files, '..'), no trailing dots or spaces (Windows drops them), also once
    folded."""
    while s and (_is_dotlike(s[0]) or s[0].isspace()):
        s = s[1:]
    while s and _ends_badly(s[-1]):
        s = s[:-1]
    return s


def is_note_path(path: str | os.PathLike[str]) -> bool:
    """Whether a file name or path names a note: it ends in ``.md``, in any case (``Old.MD`` is a note).
    The one rule for the scan, the watcher, link rewriting, lookups and the trash."""
    return os.fspath(path)[-len(NOTE_SUFFIX) :].lower() == NOTE_SUFFIX


def note_suffix_spellings() -> tuple[str, ...]:
    """Every case of ``NOTE_SUFFIX`` (``.md``, ``.MD``, ``.Md``, ``.mD``): for an indexed ``IN`` lookup of a
    note whose suffix a person may have typed in any case."""

    return tuple("".join(c) for c in itertools.product(*({ch.lower(), ch.upper()} for ch in NOTE_SUFFIX)))


def name_key(name: str) -> str:
    """What a name is looked up by (note keys, link targets, attachments, a tool's noteId): lower case in
    Unicode's composed form, so ``Café`` a file system wrote decomposed (macOS, many sync tools) and
    ``Café`` typed in a link or by an agent are one name."""
    return name.lower() if name.isascii() else unicodedata.normalize("NFC", name).lower()


def strip_note_suffix(path: str) -> str:
    """``path`` without its note suffix, in any case (``a/Old.MD`` -> ``a/Old``); any other path as is."""
    return path[: -len(NOTE_SUFFIX)] if is_note_path(path) else path


def sanitize_title(title: str) -> str:
    """Turn a note title into a safe file-name stem (without ``.md``).

    Colons, slashes and other characters Windows or Obsidian links cannot hold
    become ``-`` (also when they only appear after NFKC folding); control and
    invisible characters go; leading dots and trailing dots/spaces go; Windows
    device names get a ``_``; at most 200 characters and 250 UTF-8 bytes.
    Raises ``invalid-input`` when nothing usable is left.
    """
    if not isinstance(title, str):
        raise KmsError("invalid-input", "title must be a string")
    s = unicodedata.normalize("NFC", title)
    s = strip_note_suffix(s)
    out: list[str] = []
    for ch in s:
        if ch in "\t\n\r\v\f" or unicodedata.category(ch) in ("Zl", "Zp"):
            out.append(" ")
        elif _is_invisible(ch):
            continue
        elif ch in _TITLE_FORBIDDEN or ch in _SLASH_LIKE or any(c in _TITLE_FORBIDDEN for c in _nfkc(ch)):
            out.append("-")
        else:
            out.append(ch)
    s = re.sub(" {2,}", " ", "".join(out))
    s = _strip_edges(s)
    if _is_reserved(s):
        base = s.split(".", 1)[0]
        s = base + "_" + s[len(base) :]
    s = s[:MAX_TITLE_CHARS]
    while len(s.encode("utf-8")) > MAX_NAME_BYTES:
        s = s[:-1]
    s = _strip_edges(s)
    if not s:
        raise KmsError("invalid-input", f"title {title!r} has no usable characters for a file name")
    check_segment(s + NOTE_SUFFIX)  # belt and braces: the repaired name must pass the strict check
    return s


def check_segment(seg: str, *, what: str = "name") -> str:
    """Refuse one path segment that is not plainly a visible, portable name; return it (NFC)."""
    if not isinstance(seg, str) or not seg:
        raise KmsError("invalid-input", f"empty {what} segment (no '//' and no leading or trailing '/')")
    nfc = unicodedata.normalize("NFC", seg)
    folded = _nfkc(nfc)
    if any(_is_invisible(ch) for ch in nfc):
        raise KmsError("invalid-input", f"{what} {seg!r} contains control or invisible characters")
    if any(ch in _SEGMENT_FORBIDDEN for ch in nfc) or any(ch in _SEGMENT_FORBIDDEN for ch in folded):
        raise KmsError("invalid-input", f"{what} {seg!r} contains a separator or a reserved character")
    if _is_dotlike(nfc[0]) or folded.startswith("."):
        raise KmsError("invalid-input", f"{what} {seg!r} may not start with a dot ('..', hidden folders)")
    if nfc[-1].isspace() or nfc[0].isspace() or _is_dotlike(nfc[-1]) or folded[-1:] in (".", " "):
        raise KmsError("invalid-input", f"{what} {seg!r} may not start or end with spaces or dots")
    if _is_reserved(nfc):
        raise KmsError("invalid-input", f"{what} {seg!r} is a reserved device name on Windows")
    if len(nfc.encode("utf-8")) > 255:
        raise KmsError("invalid-input", f"{what} {seg[:40]!r}... is longer than 255 bytes")
    return nfc


def split_folder(folder: str | None) -> list[str]:
    """Validate a vault-relative folder ('' = vault root) and return its NFC segments."""
    if folder is None or folder == "":
        return []
    if not isinstance(folder, str):
        raise KmsError("invalid-input", "folder must be a string")
    if "\x00" in folder or "\\" in folder:
        raise KmsError("invalid-input", f"folder {folder!r} contains NUL or a backslash; use '/' between folders")
    if folder.startswith("/") or _DRIVE.match(folder) or _nfkc(folder).startswith(("/", "\\")):
        raise KmsError("invalid-input", f"folder {folder!r} is absolute; give a path inside the vault ('' = root)")
    if folder.endswith("/"):
        folder = folder[:-1]
    return [check_segment(seg, what="folder") for seg in folder.split("/")]


def folder_key(folder: str | None) -> str:
    """The canonical '/'-joined form of a validated folder (what the allowlist and the index see)."""
    return "/".join(split_folder(folder))


def is_within(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> bool:
    """True if ``path`` resolves (symlinks followed) to ``root`` or somewhere below it."""
    return _real_within(_realpath(path), _realpath(root))


def _real_within(real: str, real_root: str) -> bool:
    """``is_within`` for paths already resolved (each ``realpath`` costs an lstat per component)."""
    try:
        return os.path.commonpath([real, real_root]) == real_root
    except ValueError:  # different drives on Windows
        return False


def _existing_name(parent: Path, seg: str) -> str:
    """Reuse an existing entry that differs only in Unicode normalisation (macOS stores NFD)."""
    if (parent / seg).exists():
        return seg
    try:
        for entry in os.listdir(parent):
            if unicodedata.normalize("NFC", entry) == seg:
                return entry
    except OSError:
        pass
    return seg


def resolve_folder(vault_root: str | os.PathLike[str], folder: str | None) -> Path:
    """Validated absolute path of a vault folder (it need not exist yet).

    Raises ``invalid-input`` for anything but a plain relative path and also when
    the folder (through a symlink) resolves outside the vault.
    """
    root = Path(_realpath(vault_root))
    target = root
    for seg in split_folder(folder):
        target = target / _existing_name(target, seg)
    if not is_within(target, root):
        raise KmsError("invalid-input", f"folder {folder!r} leads outside the vault (symlink)")
    return target


def ensure_folder(vault_root: str | os.PathLike[str], folder: str | None) -> Path:
    """``resolve_folder`` and create what is missing, re-checking containment after each step."""
    root = Path(_realpath(vault_root))
    target = root
    for seg in split_folder(folder):
        target = target / _existing_name(target, seg)
        if not target.exists():
            try:
                target.mkdir()
            except FileExistsError:
                pass
        if not is_within(target, root) or not target.is_dir():
            raise KmsError("invalid-input", f"folder {folder!r} leads outside the vault or is not a folder")
    return target


def resolve_note_file(vault_root: str | os.PathLike[str], relpath: str) -> Path:
    """Real path of an existing note, refused if it resolves outside the vault (see ``locate_note``)."""
    return locate_note(vault_root, relpath)[0]


def locate_note(vault_root: str | os.PathLike[str], relpath: str) -> tuple[Path, str]:
    """Real path of an existing note, refused if it resolves outside the vault, and where that is
    relative to the vault (another path than ``relpath`` for a symlinked note).

    ``relpath`` comes from the index, not from the agent, so names Obsidian allows
    but kms would not create (a colon on Linux, say) are fine; only escapes are refused.
    Returning the real path means a symlinked note is written through, not replaced.
    """
    real, root = _resolved(vault_root, relpath, "note path")
    if not _real_within(real, root) or real == root:
        raise KmsError("invalid-input", f"note {relpath!r} resolves outside the vault; kms will not write it")
    return Path(real), Path(os.path.relpath(real, root)).as_posix()


def _resolved(vault_root: str | os.PathLike[str], relpath: str, what: str) -> tuple[str, str]:
    """(the real path of the vault-relative ``relpath``, the vault's real root): ``invalid-input`` for a path
    that is not plainly vault-relative. Not strict: the components that do not exist stay as named."""
    if not relpath or "\x00" in relpath or relpath.startswith("/") or _DRIVE.match(relpath):
        raise KmsError("invalid-input", f"{what} {relpath!r} is not vault-relative")
    if any(seg in ("", ".", "..") for seg in relpath.split("/")):
        raise KmsError("invalid-input", f"{what} {relpath!r} is not a plain vault path")
    root = _realpath(vault_root)
    return _realpath(os.path.join(root, *relpath.split("/"))), root


def locate_notes(vault_root: str | os.PathLike[str], relpaths: list[str]) -> list[tuple[Path, str]]:
    """``locate_note`` for many notes (a rename's linking notes): each folder is resolved once, then a
    note that is no link is that folder's entry (one ``lstat``); a symlinked one goes through
    ``locate_note``. The same answers, a fraction of the system calls."""
    root = _realpath(vault_root)
    folders: dict[str, str] = {}
    out: list[tuple[Path, str]] = []
    for rel in relpaths:
        folder, _, name = rel.rpartition("/")
        if (
            not name
            or "\x00" in rel
            or rel.startswith("/")
            or _DRIVE.match(rel)
            or any(seg in ("", ".", "..") for seg in rel.split("/"))
        ):
            out.append(locate_note(vault_root, rel))  # (refused there, with its reason)
            continue
        real_folder = folders.get(folder)
        if real_folder is None:
            real_folder = folders[folder] = _realpath(os.path.join(root, *folder.split("/"))) if folder else root
        real = os.path.join(real_folder, name)
        try:
            plain = not stat.S_ISLNK(os.lstat(real).st_mode)
        except OSError:
            plain = False
        if not plain or not _real_within(real, root):
            out.append(locate_note(vault_root, rel))
            continue
        out.append((Path(real), Path(os.path.relpath(real, root)).as_posix()))
    return out


def real_relpath(vault_root: str | os.PathLike[str], relpath: str, *, hidden: bool = False) -> str:
    """Where the vault-relative ``relpath`` really is, relative to the vault: its deepest existing ancestor's
    real path (every symlink on the way followed) and the components that do not exist yet, as they are.
    A write scope (``write.allowlist``, a token's folders) is judged on this, not on the name a symlinked
    folder gives it. ``invalid-input`` when that place is outside the vault or the vault itself (a ``hidden``
    note is not named). ``relpath`` is built by kms from checked names or read from the index."""
    real, root = _resolved(vault_root, relpath, "path")
    if not _real_within(real, root) or real == root:
        what = "a note you cannot see" if hidden else repr(relpath)
        raise KmsError("invalid-input", f"{what} leads outside the vault (a symlink); kms will not write there")
    return Path(os.path.relpath(real, root)).as_posix()


def relpath_in_vault(vault_root: str | os.PathLike[str], path: str | os.PathLike[str]) -> str:
    """Vault-relative, '/'-separated path of ``path`` (which must be inside the vault)."""
    root = _realpath(vault_root)
    real = _realpath(path)
    if not _real_within(real, root):
        raise KmsError("invalid-input", f"{path} is outside the vault")
    return Path(os.path.relpath(real, root)).as_posix()


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def open_folder(vault_root: str | os.PathLike[str], real_folder: str) -> int:
    """A descriptor of the vault folder ``real_folder`` (vault-relative, already resolved: no
    links in it), opened one component at a time without following links (``O_NOFOLLOW``). A
    write made through it lands in that folder even if a name on the way is swapped for a link to
    somewhere else meanwhile; a link met on the way (the swap came first) is refused. A vault folder
    that is gone (moved, unmounted) is ``not-found``, saying so."""
    try:
        fd = os.open(_realpath(vault_root), _DIR_FLAGS)
    except (FileNotFoundError, NotADirectoryError) as e:
        raise KmsError(
            "not-found",
            f"the vault folder {os.fspath(vault_root)!r} is gone (moved, renamed or not "
            "mounted); nothing was written. The person can move it back, or register its "
            "new place with `kms vault add`",
        ) from e
    try:
        for seg in [s for s in real_folder.split("/") if s not in ("", ".")]:
            try:
                child = os.open(seg, _DIR_FLAGS | getattr(os, "O_NOFOLLOW", 0), dir_fd=fd)
            except OSError as e:
                raise KmsError(
                    "conflict",
                    f"the folder {real_folder!r} was moved or replaced by a link while kms "
                    "was writing into it; nothing was written, try again",
                ) from e
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def same_folder(vault_root: str | os.PathLike[str], real_folder: str, fd: int) -> bool:
    """Whether ``real_folder`` still names the folder open as ``fd`` (not moved, not swapped)."""
    try:
        again = open_folder(vault_root, real_folder)
    except KmsError:
        return False
    try:
        a, b = os.fstat(again), os.fstat(fd)
        return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
    finally:
        os.close(again)
