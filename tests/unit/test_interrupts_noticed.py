"""A Ctrl-C that Python swallowed inside a long `kms vault add` (it landed in a weakref callback, an import's
module-lock cleanup, and was printed as "Exception ignored ... KeyboardInterrupt") ended the command with exit
0 as if nobody had pressed it: ``interrupts_noticed`` raises it again once the block ends."""

from __future__ import annotations

import os
import signal

import pytest

from kmscli.handled_interrupt import interrupts_noticed


def test_a_swallowed_ctrl_c_is_raised_again_when_the_block_ends() -> None:
    ran_on = []
    before = signal.getsignal(signal.SIGINT)
    with pytest.raises(KeyboardInterrupt), interrupts_noticed():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_sigmask(signal.SIG_BLOCK, [])  # a bytecode boundary for the handler to run at
        except KeyboardInterrupt:  # as a weakref callback's caller does: reported, then dropped
            pass
        ran_on.append("the rest of the block")
    assert ran_on == ["the rest of the block"]
    assert signal.getsignal(signal.SIGINT) is before  # the handler put back


def test_a_ctrl_c_that_was_not_swallowed_leaves_as_it_came_and_no_second_one_follows() -> None:
    with pytest.raises(KeyboardInterrupt), interrupts_noticed():
        os.kill(os.getpid(), signal.SIGINT)
        signal.pthread_sigmask(signal.SIG_BLOCK, [])
    with interrupts_noticed():  # a quiet block raises nothing
        pass
