"""The controller port across processes: a private control socket, its client, and
the port of a run that no live controller owns (SPEC §6, §9.4).

The socket lives in the run directory (`control.sock`), is created 0600 inside a
0700 directory, and only accepts peers running as the current user (checked
with SO_PEERCRED). One request per connection: a JSON object on one line,
answered by one JSON line. Malformed requests get a clear error, never a crash.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import struct
from pathlib import Path
from typing import Any, Literal

import msgspec

from core import audit, notices
from core.verdict import ControllerPort, Verdict

SOCKET_NAME = "control.sock"
MAX_REQUEST_BYTES = 64 * 1024
_SUN_PATH_MAX = 100


class Request(msgspec.Struct, forbid_unknown_fields=True):
    op: Literal["go", "go_all", "cancel", "guidance", "allow", "deny", "ping"]
    text: str | None = None
    request_id: str | None = None


class Reply(msgspec.Struct, omit_defaults=True):
    ok: bool
    verdict: str | None = None
    text: str | None = None
    error: str | None = None


def socket_path(run_dir: Path | str) -> Path:
    return Path(run_dir) / SOCKET_NAME


@contextlib.contextmanager
def _short_path(path: Path):
    """AF_UNIX paths are limited to ~108 bytes: go through /proc/self/fd when longer."""
    if len(os.fsencode(path)) <= _SUN_PATH_MAX:
        yield str(path)
        return
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{path.name}"
    finally:
        os.close(fd)


def _peer_uid(sock: socket.socket) -> int | None:
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return uid


def decode_request(line: bytes) -> Request:
    """Strictly decode one request; raises ValueError with a clear message."""
    try:
        req = msgspec.json.decode(line, type=Request)
    except msgspec.ValidationError as exc:
        raise ValueError(f"invalid request: {exc}") from None
    except msgspec.DecodeError:
        raise ValueError("invalid request: not a JSON object on one line") from None
    if req.op == "guidance" and (req.text is None or not req.text.strip()):
        raise ValueError("invalid request: guidance needs a non-empty 'text'")
    if req.op in ("allow", "deny") and not req.request_id:
        raise ValueError(f"invalid request: {req.op} needs a 'request_id'")
    if req.text is not None and len(req.text) > 16_000:
        raise ValueError("invalid request: 'text' is too long")
    return req


def dispatch(port: ControllerPort, req: Request, origin: str) -> Verdict:
    if req.op == "go":
        return port.go(origin=origin)  # type: ignore[call-arg]
    if req.op == "go_all":
        return port.go_all(origin=origin)  # type: ignore[call-arg]
    if req.op == "cancel":
        return port.cancel(origin=origin)  # type: ignore[call-arg]
    if req.op == "guidance":
        return port.guidance(req.text or "", origin=origin)  # type: ignore[call-arg]
    return port.permission(req.request_id or "", req.op, origin=origin)  # type: ignore[call-arg]


class ControlServer:
    """Serves a live controller's port on the run's private socket."""

    def __init__(self, run_dir: Path, port: ControllerPort) -> None:
        self.path = socket_path(run_dir)
        self.port = port
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # the socket is born 0600
        try:
            with _short_path(self.path) as bind_path:
                sock.bind(bind_path)
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
        self._server = await asyncio.start_unix_server(self._handle, sock=sock, limit=MAX_REQUEST_BYTES)

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            sock = writer.get_extra_info("socket")
            uid = _peer_uid(sock) if sock is not None else None
            if uid is not None and uid != os.getuid():
                await self._reply(writer, Reply(ok=False, error="permission denied: not the run's owner"))
                return
            try:
                line = await asyncio.wait_for(reader.readline(), 10.0)
            except (ValueError, asyncio.LimitOverrunError):
                await self._reply(writer, Reply(ok=False, error="invalid request: too long"))
                return
            except TimeoutError:
                return
            try:
                req = decode_request(line.strip())
            except ValueError as exc:
                await self._reply(writer, Reply(ok=False, error=str(exc)))
                return
            if req.op == "ping":
                await self._reply(writer, Reply(ok=True, verdict="accepted", text="pong"))
                return
            verdict = dispatch(self.port, req, "socket")
            await self._reply(writer, Reply(ok=True, verdict=verdict.kind, text=verdict.text))
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, reply: Reply) -> None:
        writer.write(msgspec.json.encode(reply) + b"\n")
        await writer.drain()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2.0)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)


def send(run_dir: Path | str, payload: dict[str, Any], *, timeout: float = 5.0) -> Reply:
    """Send one request to a run's controller (blocking). Raises OSError when unreachable."""
    path = socket_path(run_dir)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        with _short_path(path) as connect_path:
            sock.connect(connect_path)
        sock.sendall(msgspec.json.encode(payload) + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
            if len(data) > MAX_REQUEST_BYTES:
                break
    try:
        return msgspec.json.decode(data, type=Reply)
    except (msgspec.DecodeError, msgspec.ValidationError):
        raise OSError("the controller's reply was malformed") from None


def probe_live(run_dir: Path | str, *, timeout: float = 1.0) -> bool:
    """Is a live controller serving this run right now?"""
    if not socket_path(run_dir).exists():
        return False
    try:
        return send(run_dir, {"op": "ping"}, timeout=timeout).ok
    except OSError:
        return False


class RemotePort:
    """The port of a controller in another process, over its control socket."""

    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)

    def _call(self, payload: dict[str, Any]) -> Verdict:
        try:
            reply = send(self.run_dir, payload)
        except OSError:
            # The controller went away since we looked: that is a dead plan now.
            return DeadPlanPort(self.run_dir).go()
        if not reply.ok:
            return Verdict("refused", reply.error or "the controller refused the request")
        return Verdict(reply.verdict or "refused", reply.text or "")  # type: ignore[arg-type]

    def go(self, origin: str = "remote") -> Verdict:
        return self._call({"op": "go"})

    def go_all(self, origin: str = "remote") -> Verdict:
        return self._call({"op": "go_all"})

    def cancel(self, origin: str = "remote") -> Verdict:
        return self._call({"op": "cancel"})

    def guidance(self, text: str, origin: str = "remote") -> Verdict:
        return self._call({"op": "guidance", "text": text})

    def permission(self, request_id: str, decision: str, origin: str = "remote") -> Verdict:
        if decision not in ("allow", "deny"):
            return Verdict("refused", "use allow or deny")
        return self._call({"op": decision, "request_id": request_id})


class DeadPlanPort:
    """The port of a run no live controller owns: every action is the visible refusal."""

    def __init__(self, run_dir: Path | str, *, why: str | None = None, run_id: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.why = why or _why_dead(self.run_dir)
        self.run_id = run_id or self.run_dir.name

    def _refuse(self) -> Verdict:
        with contextlib.suppress(OSError, ValueError):
            audit.append(
                self.run_dir, audit.record("auto_run_plan_expired", "plan_shape_absent", "refused", run_id=self.run_id)
            )
        return Verdict("refused", notices.dead_plan(self.why, str(self.run_dir)))

    def go(self, origin: str = "local") -> Verdict:
        return self._refuse()

    def go_all(self, origin: str = "local") -> Verdict:
        return self._refuse()

    def cancel(self, origin: str = "local") -> Verdict:
        return self._refuse()

    def guidance(self, text: str = "", origin: str = "local") -> Verdict:
        return self._refuse()

    def permission(self, request_id: str = "", decision: str = "deny", origin: str = "local") -> Verdict:
        return self._refuse()


def _why_dead(run_dir: Path) -> str:
    """Why a run's plan is not in memory, from what its journal says."""
    from core.journal import JournalReader
    from core.projection import fold

    view = fold(JournalReader(run_dir / "journal.jsonl").read_all().events, run_dir=run_dir)
    if view.run_id and not view.stages:
        return "its planning turn produced no stages"
    if view.closed:
        return f"the process that ran it (pid {view.pid}) has finished"
    if view.pid:
        return f"the process that ran it (pid {view.pid}) has exited"
    return "no plandeck process owns this run"


def port_for(run_dir: Path | str) -> ControllerPort:
    """A RemotePort when a live controller answers, else the dead-plan port."""
    run_dir = Path(run_dir)
    return RemotePort(run_dir) if probe_live(run_dir) else DeadPlanPort(run_dir)
