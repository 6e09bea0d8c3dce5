"""`nmem serve` over stdio ends at once on SIGTERM or SIGINT (claude-mem's server does), exit 0,
with what it committed on disk and the database closed, while its client still holds the pipe."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from mcp_support import child_env, nmem_argv
from nmem.config import load_settings
from nmem.service.api import Service


def rpc(proc: subprocess.Popen[str], message: dict[str, Any]) -> dict[str, Any] | None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(message) + "\n")
    proc.stdin.flush()
    if "id" not in message:
        return None
    return dict(json.loads(proc.stdout.readline()))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_ends_the_stdio_server_at_once_keeping_what_it_wrote(nmem_home: Path, signum: int) -> None:
    with subprocess.Popen(nmem_argv("serve"), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=child_env(nmem_home)) as proc:
        try:
            hello = rpc(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
            assert hello is not None and "result" in hello
            rpc(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            saved = rpc(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "remember", "arguments": {"content": "Signals end the server cleanly."}}})
            assert saved is not None and not saved["result"].get("isError"), saved
            proc.send_signal(signum)
            code = proc.wait(timeout=10)  # the pipe is still open: no waiting for the client to close it
            stderr = proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert code == 0, stderr
    assert "Traceback" not in stderr
    settings = load_settings({"NMEM_HOME": str(nmem_home)})
    assert not Path(settings.db_path + "-wal").exists() or Path(settings.db_path + "-wal").stat().st_size == 0
    with Service.open(settings) as service:
        assert [h.record.content for h in service.recall("signals")] == ["Signals end the server cleanly."]
