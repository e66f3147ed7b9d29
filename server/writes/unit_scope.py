"""Where a multi-file unit (a move, a rename with its link rewrites, a folder move) may reach: every file it
moves, removes or rewrites within the session's scope (``WriteContext.check_write``), checked before anything
is read or made (issue 37: scope by real path)."""

from __future__ import annotations

from server.errors import KmsError
from server.vault.registry import Vault
from server.writes.context import WriteContext
from server.writes.unit_files import FilePlan


def check_moves(ctx: WriteContext, vault: Vault, plans: list[FilePlan], places: list[str]) -> None:
    """Every file the unit moves or removes, and every place one goes, within the session's reach
    (``WriteContext.check_write``: where each really is, symlinks followed), before anything is read or made."""
    for plan, place in zip(plans, places, strict=True):
        if plan.delete or (plan.new_path and plan.new_path != plan.path):
            ctx.check_write(vault, plan.path, hidden=plan.hidden, real=place)
        if plan.new_path and plan.new_path != plan.path:
            ctx.check_write(vault, plan.new_path, hidden=plan.hidden)


def refuse_rewrites_outside(ctx: WriteContext, vault: Vault, rewritten: list[tuple[FilePlan, str]]) -> None:
    """No file rewritten in place (a note whose links to a moved note change) outside the session's reach:
    the unit is refused, before any write, saying how many there are, hidden ones counted with the rest and
    none named (the agent could otherwise put a title of its choosing into notes it may not write)."""
    outside = sum(not ctx.may_write(vault, plan.path, real=place) for plan, place in rewritten)
    if outside:
        notes = "1 note" if outside == 1 else f"{outside} notes"
        raise KmsError(
            "folder-denied",
            f"this would rewrite the links in {notes} this session may not write (outside write.allowlist or the "
            "token's folder: scopes); nothing was changed. Ask the person to make this change, or to widen the "
            "allowed folders",
            notesOutsideScope=outside,
        )
