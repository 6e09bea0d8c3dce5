"""What a hook does for sync (`sync.auto`): start `nmem sync` detached, and return at once.

SessionStart starts a fetch, Stop a push when writes wait in the outbox. The sync runs as
its own process in its own session (`posix_spawn` with `setsid`), stdin from /dev/null and
output appended to `<data dir>/logs/sync.log`, so the hook neither waits for it nor hands it
the pipes Claude Code reads. None starts while another sync holds the lock; the started
one takes the lock itself and steps aside if it lost a race. Standard library only.
"""

from __future__ import annotations

import os
import sys

from nmem.config import CONFIG_ENV, HOME_ENV, Settings

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nmem.store.protocol import Store

LOG_NAME = "sync.log"


def enabled(settings: Settings) -> bool:
    return bool(settings["sync.auto"]) and bool(str(settings["sync.remote"]).strip())


def on_session_start(settings: Settings) -> int | None:
    """Start a background fetch; its pid, or None when none was started."""
    return start(settings, "fetch") if enabled(settings) else None


def on_stop(settings: Settings, store: Store) -> int | None:
    """Start a background push when this device has writes to push; its pid, or None."""
    return start(settings, "push") if enabled(settings) and store.sync_pending() else None


def start(settings: Settings, direction: str) -> int | None:
    """`nmem sync --<direction> --background`, detached; its pid, or None if a sync runs or it could not start."""
    from nmem.sync.lock import SyncLock  # only once sync.auto asks: a hook without sync never loads it

    if SyncLock(settings.home).held_elsewhere():
        return None
    log = os.path.join(settings.ensure_dir(settings.log_dir), LOG_NAME)
    argv = [sys.executable, "-m", "nmem", "sync", f"--{direction}", "--background"]
    env = {**os.environ, HOME_ENV: settings.home, CONFIG_ENV: settings.config_file}
    try:
        return os.posix_spawn(sys.executable, argv, env, setsid=True, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_OPEN, 1, log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600),
            (os.POSIX_SPAWN_DUP2, 1, 2),
        ])
    except (AttributeError, NotImplementedError):  # no posix_spawn, or no setsid through it, here
        return _popen(argv, env, log)
    except OSError:
        return None  # a hook never fails for sync; the next SessionStart or Stop tries again


def _popen(argv: list[str], env: dict[str, str], log: str) -> int | None:
    import subprocess

    try:
        with open(log, "ab") as out:
            return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env,
                                    start_new_session=True).pid
    except OSError:
        return None
