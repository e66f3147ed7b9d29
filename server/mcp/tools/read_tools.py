"""The read tier: ``READ_TOOLS``, its tools in listing order.

The read tools are too many for one module, so their specs sit beside their handlers in
``notes_tools``, ``orient_tools``, ``semantic_tool`` and ``recall_tools``, and only their order is
here. ``kms_start`` comes first: it is the one to call first.
"""

from __future__ import annotations

from server.mcp.tools.base import ReadSpec
from server.mcp.tools.history_tool import KMS_HISTORY
from server.mcp.tools.notes_tools import (
    KMS_GET_BACKLINKS,
    KMS_INVENTORY,
    KMS_LIST_RECENT,
    KMS_LIST_TAGS,
    KMS_READ,
    KMS_SEARCH,
)
from server.mcp.tools.orient_tools import KMS_LIST_FOLDER, KMS_LIST_PROPERTIES, KMS_REINDEX, KMS_START, KMS_STATUS
from server.mcp.tools.pending_tool import KMS_PENDING
from server.mcp.tools.recall_tools import KMS_RECALL
from server.mcp.tools.semantic_tool import KMS_SEMANTIC_SEARCH

READ_TOOLS: tuple[ReadSpec, ...] = (
    KMS_START,
    KMS_SEARCH,
    KMS_READ,
    KMS_LIST_TAGS,
    KMS_LIST_PROPERTIES,
    KMS_LIST_RECENT,
    KMS_GET_BACKLINKS,
    KMS_HISTORY,
    KMS_SEMANTIC_SEARCH,
    KMS_RECALL,
    KMS_INVENTORY,
    KMS_LIST_FOLDER,
    KMS_STATUS,
    KMS_PENDING,
    KMS_REINDEX,
)
