"""Console-script entry point, kept free of heavy imports.

``kms mcp`` is started by agent hosts that wait only a couple of seconds for a server's
tool list, so it skips Typer and Rich entirely; so does ``kms hook``, which a host runs at every event.
"""

from __future__ import annotations

import sys

from kmscli.handled_interrupt import forget_handled_interrupt


def entry() -> None:
    try:
        _run()
    finally:  # on every way out: an interrupt leaving kms is marked again by the interpreter after this
        forget_handled_interrupt()


def _run() -> None:
    if sys.argv[1:2] == ["mcp"] and not ({"-h", "--help"} & set(sys.argv[2:])):
        # deferred: kms mcp and kms hook start here without Typer: each path loads only what it runs
        import os

        from server.config.unexpanded import find_unexpanded, refusal  # deferred: (as above)

        bad = find_unexpanded(sys.argv[2:], os.environ)
        if bad:
            sys.stderr.write(refusal(bad))
            sys.exit(2)
        # deferred: kms mcp: a host waits for the tool list
        from server.mcp.serve import main as serve

        sys.exit(serve(sys.argv[2:]))
    if sys.argv[1:2] == ["hook"] and not ({"-h", "--help"} & set(sys.argv[2:])):
        # deferred: kms hook runs at every host event, without Typer
        from kmscli.hook_cmd import main as hook

        sys.exit(hook(sys.argv[2:]))
    # deferred: the Typer CLI, only for the commands that need it
    from kmscli.main import main

    main()
