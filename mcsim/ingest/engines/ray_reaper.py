"""Stops the Ray that mcsim started for a run, and removes its temporary folder, when the run
ends, however it ends (engines/ray.py starts this as a script of its own).

Ray stops the processes the driver started when the driver dies (the kernel kills them with
it), but not those its raylet started: its agents (about 180 MB) lived on for up to 100 s after
a SIGKILL, and every run left a `session_*` folder in Ray's temporary folder. This process, in
a session of its own, waits until its standard input ends: the run closed it (at its end) or
the kernel did (the run was killed). It then stops every process of this user that carries
the run's mark in its environment (`MCSIM_RAY_RUN`, set as Ray started: every process of that
Ray inherits it), SIGTERM then SIGKILL after a grace period, and removes the folder the run
gave Ray for its files. Standard library only: it runs with `python -I`.

    python -I ray_reaper.py TOKEN FOLDER
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import time

MARK = "MCSIM_RAY_RUN"
GRACE_SECONDS = 2.0


def marked(token: str) -> list[int]:
    """The processes of this user (but this one) whose environment holds the run's mark."""
    needle = f"\0{MARK}={token}\0".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle in b"\0" + fh.read() + b"\0":
                    found.append(int(entry))
        except OSError:  # gone, or another user's
            continue
    return found


def stop(token: str) -> None:
    """Stop the marked processes: SIGTERM, then SIGKILL those left after the grace period."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        for pid in marked(token):
            with contextlib.suppress(OSError):  # gone meanwhile
                os.kill(pid, signum)
        deadline = time.monotonic() + GRACE_SECONDS
        while marked(token) and time.monotonic() < deadline:
            time.sleep(0.05)


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run's Ctrl-C is the run's to handle
    token, folder = sys.argv[1:3]
    while sys.stdin.buffer.read(4096):  # until the run closes it, or dies
        pass
    stop(token)
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
