"""Whether the process that left a socket, a server file or an engine row still runs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from remindkit.runtime import process_alive


def test_a_running_process_is_alive_and_a_reaped_one_is_not() -> None:
    assert process_alive(os.getpid(), others=False)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(60)
    assert not process_alive(child.pid, others=True)
    assert not process_alive(child.pid, others=False)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root may signal anyone")
def test_another_users_process_counts_only_when_others_do() -> None:
    """pid 1 is root's: a server file of our home naming it was left by a process long
    gone; an engine row naming it may be another account's engine."""
    assert process_alive(1, others=True)
    assert not process_alive(1, others=False)
