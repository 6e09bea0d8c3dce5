"""Where the HTTP transport listens and what a request may take of it; no SDK here, so
`nmem serve` refuses a busy port or a bad host at once, before loading the MCP stack."""

from __future__ import annotations

import errno
import ipaddress
import os
import socket
from dataclasses import dataclass

from nmem.config import Settings
from nmem.errors import ConfigError

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


@dataclass(frozen=True)
class Limits:
    """What one HTTP request may take of the server (the `http.*` settings)."""

    max_body_bytes: int = 4 * 1024 * 1024
    max_header_bytes: int = 16 * 1024
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    keep_alive_timeout: int = 5
    max_connections: int = 100
    max_queue: int = 1024
    max_wait_ms: int = 1000

    @classmethod
    def from_settings(cls, settings: Settings) -> Limits:
        values = {name: settings[f"http.{name}"] for name in cls.__dataclass_fields__}
        for name, value in values.items():
            if not value > 0:
                raise ConfigError(f"http.{name} must be greater than 0, got {value}")
        return cls(**values)


def usable_cores() -> int:
    """The cores this process may run on (its affinity where the OS has one, as under `taskset` or a
    container's cpuset; else every core): what `--workers 0` and the read threads count."""
    if hasattr(os, "sched_getaffinity"):   # Linux; macOS and Windows have none
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def listen_per_worker(host: str, port: int, workers: int) -> list[list[socket.socket]]:
    """One set of listening sockets per worker process on the same `host:port`: with
    SO_REUSEPORT each worker has its own accept queue and the kernel spreads connections over
    them; without it every worker shares the one set. A port already taken, even by a process
    that set SO_REUSEPORT too (another nmem server), is refused as `listen` refuses it."""
    first = listen(host, port)
    if workers <= 1 or not hasattr(socket, "SO_REUSEPORT"):
        return [first] * max(1, workers)
    # The plain bind above proved the port free; rebind it with SO_REUSEPORT for every worker.
    for sock in first:
        sock.close()
    return [listen(host, port, reuse_port=True) for _ in range(workers)]


def listen(host: str, port: int, *, reuse_port: bool = False) -> list[socket.socket]:
    """Bound, listening sockets for `host:port` (every address the name has, as asyncio
    would bind them), or a ConfigError saying in one line why not."""
    where = "--host or the mcp.host setting"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError):
        raise ConfigError(f"cannot listen on {host}: no such host name ({where})") from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, address in dict.fromkeys((f, k, p, a) for f, k, p, _, a in infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(2048)
            sock.setblocking(False)
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            message = (f"port {port} on {host} is in use: stop what holds it, or choose another port "
                       "(--port or the mcp.port setting)")
        elif exc.errno == errno.EADDRNOTAVAIL:
            message = f"cannot listen on {host}: not an address of this machine ({where})"
        elif exc.errno == errno.EACCES:
            message = f"cannot listen on port {port} of {host}: permission denied (ports below 1024 need privileges)"
        else:
            message = f"cannot listen on {host} port {port}: {exc.strerror or exc}"
        raise ConfigError(message) from None
    return sockets
