"""The dashboard's Textual CSS.

Kept as a Python string rather than an ``app.tcss`` file so it ships with the package
without package-data configuration. Narrow (< 120 columns): the detail pane sits under
the feed; wide: beside it (``DashboardScreen.HORIZONTAL_BREAKPOINTS``).
"""

CSS = """
#topbar {
    height: 1;
    background: $panel;
}

#sessions {
    height: auto;
    max-height: 5;
    border-top: solid $primary-darken-2;
    border-title-color: $text-accent;
}

#main {
    height: 1fr;
    layout: vertical;
}

#feedcol {
    height: 1fr;
}

#filters {
    height: 1;
    background: $boost;
}

#filters Input {
    width: 1fr;
    min-width: 14;
}

#feed {
    height: 1fr;
    border-top: solid $primary-darken-2;
    border-title-color: $text-accent;
    border-subtitle-color: $text-muted;
}

#detail {
    height: 8;
    border-top: solid $primary-darken-2;
    border-title-color: $text-accent;
    padding: 0 1;
}

DashboardScreen.-wide #sessions {
    max-height: 12;
}

/* A short terminal (80x24): five sessions rather than three, the detail pane cut to its first lines
   (Enter shows all of it), so the feed keeps most of the height. */
DashboardScreen.-short #sessions {
    max-height: 7;
}

DashboardScreen.-short.-narrow #detail {
    height: 5;
}

DashboardScreen.-wide #main {
    layout: horizontal;
}

DashboardScreen.-wide #detail {
    height: 1fr;
    width: 64;
    border-left: solid $primary-darken-2;
}

#filters #f-session {
    width: 17;
}

#filters #f-tool {
    width: 12;
}

#filters #f-status {
    width: 16;
}

#detail-full {
    height: 1fr;
    padding: 0 1;
}

/* modals */

ModalScreen {
    align: center middle;
}

#dialog {
    width: 76;
    max-width: 100%;
    height: auto;
    max-height: 90%;
    border: round $primary;
    padding: 0 1;
    background: $surface;
}

#dialog.wide {
    width: 90%;
    height: 90%;
}

#dialog #removed {
    height: auto;
    max-height: 12;
    margin: 1 0;
}

#dialog #reason {
    margin: 1 0;
}

#dialog DataTable, #dialog TextArea {
    height: 1fr;
}

.buttons {
    height: auto;
    align-horizontal: right;
}

.buttons Button {
    margin-left: 1;
}

/* settings */

#settings {
    padding: 0 2;
}

#settings-title {
    margin-top: 1;
}

#settings-note {
    margin-bottom: 1;
}

.setting {
    height: auto;
    margin-bottom: 1;
}

.setting Input, .setting Select {
    width: 60;
    max-width: 100%;
}

.setting-error {
    display: none;
}

#settings-status {
    margin-top: 1;
}

#note-text {
    border: none;
}

/* trash */

#trash-title {
    margin: 1 1 0 1;
}

#trash {
    height: 1fr;
    margin: 1 1 0 1;
}

#trash-status {
    margin: 0 1;
}

/* a note's history */

#history-title {
    margin: 1 1 0 1;
}

#history {
    height: 1fr;
    margin: 1 1 0 1;
}

#history-diff-box {
    height: 1fr;
    margin: 0 1;
    border-top: solid $primary;
}

#history-status {
    margin: 0 1;
}

#history-confirm-diff {
    height: 1fr;
    margin: 1 0;
}
"""
