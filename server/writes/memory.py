"""``kms_remember``: record one durable fact in the person's or the project's memory note.

The memory folder (``memory.folder``) is its own allowlist entry: this operation writes there, and only to
memory notes it names itself, whatever ``write.allowlist`` says (the other write tools still follow it); a
token's ``folder:`` scopes still apply, as they do to every write. A fact already there (the same text once
normalised, or, with the model loaded, one whose embedding is near-identical) is not added again: the answer
is ``duplicate`` with the line that holds it, and nothing is written. A new note is a ``FileCreated``, a fact
added to an existing one a ``TextInserted``: provenance and revert treat it as any other write.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable, Sequence
from typing import Any, cast

from server.activity.changes import TextInserted
from server.errors import KmsError
from server.index.memory import DEFAULT_CATEGORY, MEMORY_TAG, About, Fact, find_memory_note, normalized, parse_facts
from server.vault.files import TextFormat, convert_newlines
from server.vault.registry import Vault, get_vault
from server.writes.cas import write_note
from server.writes.context import NoteRef, WriteContext
from server.writes.limits import MAX_CATEGORY_CHARS, MAX_FACT_CHARS
from server.writes.operations import check_note_folder, create
from server.writes.outcome import Edit, WriteOutcome
from server.writes.positions import after_section

NEAR_DUPLICATE = 0.93  # cosine of all-MiniLM-L6-v2 embeddings above which two facts say the same thing
NEAR_POOL = 200  # the most recent facts compared by meaning (exact text is compared with all)
NearCheck = Callable[[str, Sequence[Fact]], Fact | None]


def check_fact(text: str, category: str | None) -> tuple[str, str]:
    """The fact as one line and its category; ``invalid-input`` for what cannot be one list item."""
    fact = " ".join(text.split())
    if not fact:
        raise KmsError("invalid-input", "text is empty: give the fact to remember")
    if len(fact) > MAX_FACT_CHARS:
        raise KmsError(
            "invalid-input",
            f"text is {len(fact)} characters; a fact is at most {MAX_FACT_CHARS}: record one fact per call",
        )
    if "\x00" in fact:
        raise KmsError("invalid-input", "text contains a NUL character")
    cat = " ".join((category or DEFAULT_CATEGORY).split()).lstrip("#").strip() or DEFAULT_CATEGORY
    if len(cat) > MAX_CATEGORY_CHARS or "\x00" in cat:
        raise KmsError(
            "invalid-input",
            f"category is at most {MAX_CATEGORY_CHARS} characters (a heading such as 'Preferences' or 'Decisions')",
        )
    return fact, cat[:1].upper() + cat[1:]


def _slug(project: str) -> str:
    tail = re.split(r"[/\\:]", project.rstrip("/\\"))[-1] or "project"
    return re.sub(r"[^\w.-]+", "-", tail).strip("-.")[:60] or "project"


def note_titles(about: About, project: str | None) -> list[str]:
    """The titles a new memory note takes, in order (the second when a file already has the first)."""
    if about == "person":
        return ["person", "person-" + hashlib.sha256(b"person").hexdigest()[:6]]
    assert project is not None
    slug = _slug(project)
    return [f"project-{slug}", f"project-{slug}-{hashlib.sha256(project.encode()).hexdigest()[:6]}"]


def _new_note_text(about: About, project: str | None, category: str, item: str) -> str:
    subject = f"project {_slug(project or '')}" if about == "project" else "the person"
    head = ["---", f"memory: {about}"]
    if about == "project":
        head.append(f"project: {json.dumps(project, ensure_ascii=False)}")
    head += [
        f"tags: [{MEMORY_TAG}]",
        "---",
        f"# Memory: {subject}",
        "",
        f"Durable facts agents recorded with kms_remember about {subject}, one dated list item per fact "
        "under its category. Edit or delete them freely.",
        "",
        f"## {category}",
        "",
        item,
        "",
    ]
    return "\n".join(head)


def _scope_vault(ctx: WriteContext, existing: dict[str, Any] | None) -> Vault:
    """Where the memory note is: the existing one's vault, else the session's, else the first added."""
    if existing is not None:
        return get_vault(ctx.conn, existing["vault_id"])
    return ctx.home_vault()


def _match(fact: str, facts: Sequence[Fact], near: NearCheck | None) -> Fact | None:
    want = normalized(fact)
    same = next((f for f in facts if normalized(f.text) == want), None)
    if same is None and near is not None and facts:
        same = near(fact, facts[-NEAR_POOL:])
    return same


def _duplicate(note: dict[str, Any] | NoteRef, vault: str, about: About, line: Fact) -> WriteOutcome:
    ref = note if isinstance(note, dict) else {"noteId": note.id, "path": note.path, "title": note.title}
    result: Any = {
        "status": "duplicate",
        "about": about,
        "existing": line.line,
        "category": line.category,
        "noteId": ref["noteId"],
        "path": ref["path"],
        "title": ref["title"],
        "vault": vault,
        "bytesBefore": 0,
        "bytesAfter": 0,
        "linesAdded": 0,
        "changed": False,
    }
    return WriteOutcome(result)


def remember(
    ctx: WriteContext,
    *,
    about: About,
    text: str,
    category: str | None = None,
    now: float | None = None,
) -> WriteOutcome:
    """Add ``text`` as a dated item under ``category`` of the memory note of ``about``: in the session's
    memory folder (``ctx.memory_folder``), for its project (``ctx.identity``), compared by meaning with the
    facts already there when the process's model is loaded (``ctx.model``)."""
    conn, folder = ctx.conn, ctx.memory_folder
    project = ctx.identity.project if ctx.identity is not None else None
    embedder = ctx.model.ready_embedder() if ctx.model is not None else None
    near = near_check(embedder) if embedder is not None else None
    if not folder:
        raise KmsError(
            "feature-disabled",
            "agent memory is off: memory.folder is empty (a person can set it with "
            "`kms config set memory.folder kms-memory`)",
        )
    if about == "project" and not project:
        raise KmsError(
            "invalid-input",
            "this session has no project: call kms_start with project (your working "
            "folder or repository), or remember about the person",
        )
    fact, cat = check_fact(text, category)
    item = f"- {time.strftime('%Y-%m-%d', time.localtime(time.time() if now is None else now))}: {fact}"
    existing = find_memory_note(conn, folder, about, project, ctx.vault_scope())
    vault = _scope_vault(ctx, existing)
    # the memory folder's own entry; write.allowlist does not apply here (a token's folders do)
    ctx = ctx.but(allowlist=ctx.allowlist.own_entry(folder))
    if existing is None:
        return _create(ctx, vault, folder, about, project, cat, item)
    indexed = _match(fact, parse_facts(existing["body"]), near)  # by meaning: outside the note's lock
    if indexed is not None:
        return _duplicate(existing, vault.name, about, indexed)

    note = NoteRef(
        existing["noteId"], vault.id, existing["path"], existing["title"], existing["folder"], existing["size_bytes"]
    )
    check_note_folder(ctx, vault, note)
    found: list[Fact] = []

    def compute(current: str, fmt: TextFormat) -> Edit:

        facts = parse_facts(current)
        same = _match(fact, facts, None)  # the file as it is now (a person may have added it meanwhile)
        if same is not None:
            found.append(same)
            return Edit(current, None)
        nl = fmt.newline
        heading_known = any(f.category.casefold() == cat.casefold() for f in facts)
        try:
            pos, ins = after_section(
                current, note.title, cat, convert_newlines(item, nl), nl if heading_known else nl + nl, nl
            )
        except KmsError:  # no such heading yet: a new section at the end
            pos, ins = after_section(current, note.title, None, f"## {cat}{nl}{nl}{item}", nl + nl, nl)
        return Edit(current[:pos] + ins + current[pos:], TextInserted(note.path, pos, ins))

    outcome = write_note(ctx, vault, note, compute)
    if found:
        return _duplicate(note, vault.name, about, found[0])
    return _added(outcome, about, cat, item)


def _added(outcome: WriteOutcome, about: About, category: str, line: str) -> WriteOutcome:
    cast(dict[str, Any], outcome.result).update({"status": "added", "about": about, "category": category, "line": line})
    return outcome


def _create(
    ctx: WriteContext, vault: Vault, folder: str, about: About, project: str | None, cat: str, item: str
) -> WriteOutcome:

    content = _new_note_text(about, project, cat, item)
    titles = note_titles(about, project)
    for i, title in enumerate(titles):
        try:
            outcome = create(ctx, vault, title=title, content=content, folder=folder)
        except KmsError as e:
            if e.kind != "already-exists" or i == len(titles) - 1:
                raise
            continue
        return _added(outcome, about, cat, item)
    raise AssertionError("unreachable")


def near_check(embedder: Any) -> NearCheck:
    """A check by meaning over the loaded model: the existing fact most similar to the new one, if
    its cosine similarity is at least ``NEAR_DUPLICATE``."""

    def check(fact: str, facts: Sequence[Fact]) -> Fact | None:
        vecs = embedder.embed_many([fact, *(f.text for f in facts)])
        sims = vecs[1:] @ vecs[0]
        best = int(sims.argmax())
        return facts[best] if float(sims[best]) >= NEAR_DUPLICATE else None

    return check
