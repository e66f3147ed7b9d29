"""Settings schema and file, custom servers, folder globs and the session contract."""
