"""``kms tui``: a live Textual dashboard of what agents do with the vaults.

``tui.app.create_app`` builds the app for the CLI and the tests alike. The TUI only
reads the database (from worker threads, each with its own connection), except for a
revert the person confirms and the settings screen. It never imports ``kmscli``.
"""
