"""What every MCP tool is made of: a spec beside its handler, in its tier's tuple, and a call context.

A read tool is a ``ReadSpec``: its handler is ``handler(ctx: ToolContext, args) -> dict`` over the store.
A tool of the write, edit or organize tier is a ``WriteSpec``: its handler is
``handler(ctx: WriteContext, args) -> WriteOutcome``, run by the write guard. Both raise ``KmsError``
for anything they refuse, and each spec declares the kinds it can answer (checked against
``server.errors.KINDS`` when it is built, and rendered into its description from there). The
spec types are generic in the input model, so the type checker matches each handler to its model.
The MCP adapter, the docs and the completeness test all derive from the registry, so a tool
cannot exist half-way.

Each spec also carries an ``example`` call (and each write spec a ``denied`` one): the tests that go
through every tool (the gates, idempotent retries, the allowlist, long names, the privacy canaries, the
vault scope) take their arguments from there, so a new tool is its operation, its spec and its own test,
and a new read tool is aimed at hidden notes and at other vaults without anyone listing it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Literal, TypeVar

import apsw
from mcp_types import ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, create_model

from server.activity.agent_session import AgentSession
from server.activity.idempotency import KEY_FIELD, MAX_KEY_CHARS
from server.activity.visits import SessionIdentity
from server.config.session_contract import SessionConfig
from server.config.tiers import Tier, WriteTier
from server.errors import KINDS, KmsError, check_kinds, errors_sentence
from server.index.cold import NOT_YET, incomplete
from server.index.note_data import DATA_SENTENCE
from server.index.notes import index_is_empty
from server.index.properties import MAX_FILTERS
from server.mcp.process import LazySemanticService, ProcessServices
from server.store.db import thread_connection
from server.vault.registry import get_vault
from server.vault.scope import EVERY, VaultScope, resolve, scope_ids
from server.writes.limits import MAX_NOTE_NAME_CHARS

# property filters (server.index.properties): one field for kms_search, kms_semantic_search, kms_list_folder
WhereField = Field(
    default=None,
    max_length=MAX_FILTERS,
    description="Property filters, all must hold (docs/properties.md): 'status:evergreen', 'type:book,film' "
    "(one of), 'source:*' (has it), 'due<2026-12-31', 'rating>=4' (numbers as numbers), '-draft:*' (negated). "
    "A list property matches any item. kms_list_properties shows the properties in use.",
)

# every tool's noteId: one field, so a note is named the same way everywhere (docs/limits.md)
NoteIdField = Field(
    min_length=1,
    max_length=MAX_NOTE_NAME_CHARS,
    description="The note: a noteId from another kms tool, or its title, path or vault:path.",
)

if TYPE_CHECKING:  # the write path's types only: the handlers import the operations when first called
    from server.writes.context import WriteContext
    from server.writes.outcome import WriteOutcome

PAYLOAD_CAP_BYTES = 100_000

# what every example is written against: the example vault (tests/support/examples.py builds it, a few notes
# in drafts/ and drafts/sub/, folders inbox/a and inbox/x) and this allowlist (``write.allowlist``'s own
# example: the notes directly in drafts/, and inbox/ and below)
EXAMPLE_ALLOWLIST = ("drafts/*", "inbox")


@dataclass(frozen=True)
class Denied:
    """A write call the example allowlist refuses ``folder-denied``, and the path its refusal names."""

    args: Mapping[str, Any]
    path: str


class StrictInput(BaseModel):
    """Tool inputs: unknown keys and wrong types are refused, never coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @classmethod
    def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The schema with nested models written inline: no ``$ref`` a client must resolve."""
        schema = super().model_json_schema(*args, **kwargs)
        defs = schema.pop("$defs", {})

        def inline(node: Any) -> Any:
            if isinstance(node, dict):
                ref = node.get("$ref")
                if isinstance(ref, str) and ref.startswith("#/$defs/"):
                    rest = {k: v for k, v in node.items() if k != "$ref"}
                    return {**inline(defs[ref.rsplit("/", 1)[1]]), **inline(rest)}
                return {k: inline(v) for k, v in node.items()}
            if isinstance(node, list):
                return [inline(v) for v in node]
            return node

        return inline(schema)


class ToolOutput(BaseModel):
    model_config = ConfigDict(extra="allow")


class Truncated(BaseModel):
    truncated: Literal[True]
    cursor: str
    message: str


M = TypeVar("M", bound=StrictInput)

READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)
ADD_ONLY = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False)

REVERTIBLE = "A person can revert the whole call from the dashboard."  # said by the tools whose calls revert as one

# what any read call can answer besides its own kinds: refused input, a tier that is off
READ_PATH_KINDS = ("invalid-input", "feature-disabled")
# what the write guard (server.writes.guard) can answer for any write call: its gate, the person's controls,
# the rate limit and the approval flow
GUARD_KINDS = ("invalid-input", "feature-disabled", "rate-limited", "paused", "revoked", "rejected", "approval-timeout")


@dataclass(frozen=True, kw_only=True)
class ToolSpec:
    """What every tool declares; ``ReadSpec`` and ``WriteSpec`` add its handler, typed by tier.

    ``about`` says what the tool does and when to use it (static); ``errors`` the kinds its own handler
    can answer. ``description`` (what ``tools/list`` shows) is both, with the path's kinds too.
    """

    name: str
    tier: Tier
    about: str
    errors: tuple[str, ...] = ()
    input_model: type[StrictInput]
    output_model: type[BaseModel]
    annotations: ToolAnnotations
    # a read is a note whose text the agent received: its body, a page or a section of it (kms_read, a
    # resource read), or a whole section in a kms_recall item (``dispatch.note_ids_in``); excerpts around a
    # match (search hits, backlink snippets) and summaries are hits, not reads (the queries go to
    # ``session_searches``). Reads feed `kms session list`, the dashboard's Reads and the session note.
    records_reads: bool = False
    # returns note text (bodies, excerpts, summaries, facts): its description says that text is data
    # (``server.index.note_data``); the boundary itself is added to every answer whatever this says
    note_text: bool = False
    cursor_field: str | None = None  # input field that pages the result, echoed on truncation
    # a read that answers from an index in well under a millisecond runs on the server's event loop, as the
    # writes do: the two thread hand-offs it skips are most of its round trip (``kms_list_folder``)
    inline: bool = False
    # valid arguments for one call in the example vault (each write's runs once in a fresh one); a ``version``
    # in it stands for the note's current version, which the caller fills in (it cannot be known here)
    example: Mapping[str, Any]
    # answers from what a new vault's second index transaction writes (tags, links, properties, kept counts,
    # ``server.index.cold``): while a vault the session sees has only its first, the answer says so in its
    # ``index`` field instead of being silently shorter (``ToolContext.index_note``)
    built_later: bool = False

    path_kinds: ClassVar[tuple[str, ...]] = ()  # what the path every such tool takes can answer
    tiers: ClassVar[tuple[Tier, ...]] = ()  # the tiers such a tool may be of

    def __post_init__(self) -> None:
        check_kinds(self.errors, self.name)
        if self.tier not in self.tiers:
            raise ValueError(
                f"{self.name}: a {type(self).__name__} is of tier {' or '.join(self.tiers) or 'none'}, "
                f"not {self.tier!r}"
            )

    @property
    def kinds(self) -> tuple[str, ...]:
        """Every error kind this tool can answer (its own and its path's), in ``KINDS`` order."""
        return tuple(k for k in KINDS if k in self.errors or k in self.path_kinds)

    @property
    def description(self) -> str:
        data = f" {DATA_SENTENCE}" if self.note_text else ""
        return f"{self.about}{data} {errors_sentence(self.kinds)}".strip()


@dataclass(frozen=True, kw_only=True)
class ReadSpec(ToolSpec, Generic[M]):
    """A read tool: gated and run by ``ToolRunner`` on a worker thread (or inline), over a ``ToolContext``."""

    tier: Literal["read"] = "read"
    input_model: type[M]
    handler: Callable[[ToolContext, M], dict[str, Any]]
    path_kinds: ClassVar[tuple[str, ...]] = READ_PATH_KINDS
    tiers: ClassVar[tuple[Tier, ...]] = ("read",)


@dataclass(frozen=True, kw_only=True)
class WriteSpec(ToolSpec, Generic[M]):
    """A tool of the write, edit or organize tier: handed whole to the write guard, which gates, validates,
    rate-limits, runs the handler over the call's ``WriteContext`` and records the call."""

    tier: WriteTier
    input_model: type[M]
    handler: Callable[[WriteContext, M], WriteOutcome]
    # a call refused under ``EXAMPLE_ALLOWLIST``; or, for a tool that writes only in a folder of its own (the
    # memory folder, the capture folder), the sentence that says why no call of it can be
    denied: Denied | str
    path_kinds: ClassVar[tuple[str, ...]] = GUARD_KINDS
    tiers: ClassVar[tuple[Tier, ...]] = ("write", "edit", "organize")

    def __post_init__(self) -> None:
        super().__post_init__()
        if KEY_FIELD not in self.input_model.model_fields:  # every write tool takes one, declared once here
            object.__setattr__(self, "input_model", with_idempotency_key(self.input_model))


def with_idempotency_key(model: type[M]) -> type[M]:
    """``model`` with the optional ``idempotencyKey`` every write tool takes (``server.activity.idempotency``)."""
    optional_str: Any = str | None
    keyed: type[M] = create_model(
        model.__name__,
        __base__=model,
        __module__=model.__module__,
        idempotencyKey=(
            optional_str,
            Field(
                default=None,
                min_length=1,
                max_length=MAX_KEY_CHARS,
                description=(
                    "Optional: a key of your choosing for this call. A retry with the same key in this session "
                    "answers the first call's result (replayed true) and writes nothing."
                ),
            ),
        ),
    )
    keyed.__doc__ = model.__doc__
    return keyed


@dataclass
class ToolContext:
    """What a read handler may reach: its session (config, identity), the process's services (model,
    watcher) and a connection owned by the calling thread."""

    session: AgentSession
    services: ProcessServices
    _scope: tuple[dict[str, int], VaultScope] | None = field(default=None, init=False, repr=False)

    @property
    def config(self) -> SessionConfig:
        return self.session.config

    @property
    def conn(self) -> apsw.Connection:
        return thread_connection(self.config.db_path)

    @property
    def session_id(self) -> str:
        return self.session.id

    @property
    def identity(self) -> SessionIdentity:
        return self.session.identity

    @property
    def semantic(self) -> LazySemanticService | None:
        return self.services.semantic

    @property
    def watching(self) -> bool:
        """Whether this process keeps the index live (its watcher runs)."""
        return self.services.watcher is not None and self.services.watcher.running

    def index_note(self) -> str | None:
        """What an answer from links, tags and counts says while a vault in the session's scope is
        searchable but not complete (None once every one is)."""
        scope = self.vault_filter()
        return NOT_YET if any(scope.sees(vid) for vid in incomplete(self.conn)) else None

    def require_index(self) -> None:

        problem = index_is_empty(self.conn)
        if problem:
            raise KmsError("no-index", problem)

    def vault_filter(self, name: str | None = None) -> VaultScope:
        """The vaults a read may see, from the call's ``vault`` argument and the session's scope.

        The one place the scope is enforced for reads: every vault only for an unscoped session called
        without ``vault``; a scoped session answers for its vaults only (one or several), and a ``vault``
        argument naming another one is refused (without saying whether it exists).
        """

        names = self.config.vault_names
        if not names:
            return EVERY if name is None else VaultScope.only([get_vault(self.conn, name).id])
        if self._scope is None:
            scope = resolve(self.conn, names)  # not-found when none of its vaults is registered any more
            self._scope = (scope_ids(self.conn, names), scope)
        ids, scope = self._scope
        if name is None:
            return scope
        picked = ids.get(name) or next((i for i in ids.values() if str(i) == name), None)
        if picked is None:
            said = f"vault {names[0]!r}" if len(names) == 1 else f"vaults {', '.join(repr(n) for n in names)}"
            raise KmsError(
                "invalid-input",
                f"this session is scoped to {said}; it cannot see vault "
                f"{name!r} (omit vault, or start a session for that vault)",
                vault=name,
                scope=names[0] if len(names) == 1 else list(names),
            )
        return VaultScope.only([picked])
