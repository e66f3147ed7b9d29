"""When an agent's write waits for the person's review: one policy from the session's settings.

``review.mode`` says when the person reviews agents' writes:

- ``before``: every write is staged and lands only once approved (today's ``write.approval = always``);
- ``after``: writes land at once and are listed for one-click undo (``kms pending --after``, the dashboard);
- ``off``: writes land, no list.

Whatever the mode, a unit above ``review.max_lines`` lines (added plus removed) or ``review.max_files`` files
waits for review before it lands (0: no such threshold).

The older ``write.approval`` settings keep working and are read into the same policy, never rewritten in the
file: ``always`` is ``before``; ``bulk`` is ``off`` with the thresholds one file and ``write.approval_lines``
lines (what ``bulk`` always meant); ``off`` is ``off``. ``review.mode``, once set, decides the mode and
``review.max_*``, once set, the thresholds; but a session forced to ask (``kms claude --approve``, a token's
``approval`` scope, both setting ``write.approval = always`` for that one session) is ``before`` whatever
``review.mode`` says: a ceiling the person or a token set is never loosened by the general setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from server.config.session_contract import SessionConfig

MODES = ("before", "after", "off")


@dataclass(frozen=True)
class ReviewPolicy:
    """A session's review mode and thresholds (``None``: no threshold of that kind)."""

    mode: str
    max_lines: int | None = None
    max_files: int | None = None

    @property
    def has_threshold(self) -> bool:
        return self.max_lines is not None or self.max_files is not None

    def above(self, files: int, lines: int) -> bool:
        """Whether a unit of ``files`` files and ``lines`` changed lines must wait for review whatever the mode."""
        return (self.max_files is not None and files > self.max_files) or (
            self.max_lines is not None and lines > self.max_lines
        )


def policy(config: SessionConfig) -> ReviewPolicy:
    """The review policy of a session (see the module docstring for how the older settings map)."""
    bulk = config.approval == "bulk"
    mode = "before" if config.approval == "always" else config.review_mode or "off"
    max_lines = config.review_max_lines or (config.approval_lines if bulk else None)
    max_files = config.review_max_files or (1 if bulk else None)
    return ReviewPolicy(mode, max_lines, max_files)
