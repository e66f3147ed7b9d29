"""Remote mode: the public listener, kms's OAuth authorization server and its consent page (docs/remote.md)."""
