"""Every MCP tool's name, in one list below the registry (``server.mcp.tools``).

The activity feed, the session note, ``kms_start``'s budget and the dashboard name tools without importing the
MCP layer above them; they take the names from here, and ``tests/unit/test_tool_names.py`` checks that each
is a registry tool (in listing order) and that no module below the registry spells one by hand. A new tool
joins the list when a lower layer first names it.
"""

from __future__ import annotations

KMS_START = "kms_start"
KMS_SEARCH = "kms_search"
KMS_READ = "kms_read"
KMS_LIST_TAGS = "kms_list_tags"
KMS_LIST_PROPERTIES = "kms_list_properties"
KMS_LIST_RECENT = "kms_list_recent"
KMS_GET_BACKLINKS = "kms_get_backlinks"
KMS_HISTORY = "kms_history"
KMS_SEMANTIC_SEARCH = "kms_semantic_search"
KMS_RECALL = "kms_recall"
KMS_INVENTORY = "kms_inventory"
KMS_LIST_FOLDER = "kms_list_folder"
KMS_STATUS = "kms_status"
KMS_REINDEX = "kms_reindex"
KMS_CREATE = "kms_create"
KMS_APPEND = "kms_append"
KMS_UPDATE_PROPERTIES = "kms_update_properties"
KMS_INSERT_AT = "kms_insert_at"
KMS_REMEMBER = "kms_remember"
KMS_CREATE_MANY = "kms_create_many"
KMS_LINK = "kms_link"
KMS_CAPTURE = "kms_capture"
KMS_EDIT = "kms_edit"
KMS_MOVE = "kms_move"
KMS_RENAME = "kms_rename"
KMS_TRASH = "kms_trash"
KMS_MOVE_FOLDER = "kms_move_folder"
KMS_RENAME_FOLDER = "kms_rename_folder"

# in the registry's listing order: the read tools first, then the write, edit and organize tiers
TOOL_NAMES: tuple[str, ...] = (
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
    KMS_REINDEX,
    KMS_CREATE,
    KMS_APPEND,
    KMS_UPDATE_PROPERTIES,
    KMS_INSERT_AT,
    KMS_REMEMBER,
    KMS_CREATE_MANY,
    KMS_LINK,
    KMS_CAPTURE,
    KMS_EDIT,
    KMS_MOVE,
    KMS_RENAME,
    KMS_TRASH,
    KMS_MOVE_FOLDER,
    KMS_RENAME_FOLDER,
)
