"""The person's undo: take back what an agent did, or bring back what kms kept.

``revert`` (one call; ``revert_files`` for a change of several files), ``trash`` (kms's trash and its
restore), ``restore`` (a version from the note history), ``undo_outside`` (the notes a session changed
outside kms) and ``undo_session`` (a whole session, all of the above in one preview). Each is the person's
write, recorded through ``server.writes.person.person_write``.
"""
