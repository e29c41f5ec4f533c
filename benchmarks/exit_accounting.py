"""Every process's exact CPU at its exit, from the kernel's per-task exit accounting (Linux taskstats over
generic netlink), for the process sampler (`process_costs.run`).

Sampling /proc reads a process's CPU until shortly before it exits: what it spends after the last reading
(an engine writing its checkpoint, an interpreter shutting down) is in the whole tree's total but in no
kind. On a one-cluster `up` that was ~0.3 s of 3.6 (measured with this module), and it was charged to the
product, never to the floor. The kernel sends an exit record for every task to a listener registered for
the machine's CPUs (`TASKSTATS_CMD_ATTR_REGISTER_CPUMASK`): a thread's own (`TASKSTATS_TYPE_AGGR_PID`)
and, when the last thread of a multi-threaded process exits, the process's total, its exited threads
included (`TASKSTATS_TYPE_AGGR_TGID`). Registering needs root (CAP_NET_ADMIN) and a kernel with
CONFIG_TASKSTATS; without either, `ExitAccounting.start()` returns None and the sampler's readings stand.
The listener hears every exit on the machine: on a machine busy with other work (a build, a test suite) its
socket can overflow and records are lost, and under load a record (made before the exiting process frees
its memory) and wait4 were seen to differ by up to ~5 % (exact in every quiet run; once, during a full
`make test`, a multi-threaded process's total fell 18 % short), so the sampler keeps a process's last
reading where that is higher. Run the benchmarks on a quiet machine.

Field offsets are those of `struct taskstats` (linux/taskstats.h), stable since its version 1 for the
fields read here: ac_utime and ac_stime (microseconds) at bytes 152 and 160.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

_NETLINK_GENERIC = 16
_GENL_ID_CTRL = 0x10
_CTRL_CMD_GETFAMILY = 3
_CTRL_ATTR_FAMILY_ID = 1
_CTRL_ATTR_FAMILY_NAME = 2
_TASKSTATS_CMD_GET = 1
_REGISTER_CPUMASK = 3
_TYPE_PID, _TYPE_TGID, _TYPE_STATS, _TYPE_AGGR_PID, _TYPE_AGGR_TGID = 1, 2, 3, 4, 5
_NLM_F_REQUEST = 1
_UTIME_OFFSET = 152  # ac_utime, then ac_stime: microseconds


def _attribute(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("HH", length, kind) + payload + b"\0" * (-length % 4)


def attributes(buffer: bytes) -> list[tuple[int, bytes]]:
    """The netlink attributes in `buffer`: (type, payload), the nested flag cleared."""
    found = []
    while len(buffer) >= 4:
        length, kind = struct.unpack("HH", buffer[:4])
        if length < 4:
            break
        found.append((kind & 0x3FFF, buffer[4:length]))
        buffer = buffer[(length + 3) & ~3 :]
    return found


def _request(family: int, command: int, payload: bytes, sequence: int) -> bytes:
    body = struct.pack("BBH", command, 1, 0) + payload
    return struct.pack("IHHII", 16 + len(body), family, _NLM_F_REQUEST, sequence, os.getpid()) + body


def exit_records(message: bytes) -> list[tuple[bool, int, float]]:
    """(whole process?, pid or tgid, CPU seconds) of each record in one taskstats message: a task's own, and
    with the last task of a multi-threaded process, that process's total in the same message."""
    found = []
    for kind, payload in attributes(message[20:]):  # nlmsghdr (16) + genlmsghdr (4)
        if kind not in (_TYPE_AGGR_PID, _TYPE_AGGR_TGID):
            continue
        ident = stats = None
        for inner, value in attributes(payload):
            if inner in (_TYPE_PID, _TYPE_TGID) and len(value) >= 4:
                ident = struct.unpack("I", value[:4])[0]
            elif inner == _TYPE_STATS and len(value) >= _UTIME_OFFSET + 16:
                stats = value
        if ident is not None and stats is not None:
            utime, stime = struct.unpack("QQ", stats[_UTIME_OFFSET : _UTIME_OFFSET + 16])
            found.append((kind == _TYPE_AGGR_TGID, ident, (utime + stime) / 1e6))
    return found


class ExitAccounting:
    """Listens for exit records while a measured command runs: `cpu_s(pid)` is a process's exact CPU."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._processes: dict[int, float] = {}  # tgid -> CPU of the whole process (multi-threaded)
        self._threads: dict[int, float] = {}  # pid -> CPU of that task alone
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._listen, name="exit-accounting", daemon=True)

    @classmethod
    def start(cls) -> ExitAccounting | None:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, _NETLINK_GENERIC)
        except (OSError, AttributeError):  # no netlink (not Linux)
            return None
        try:
            sock.bind((0, 0))
            # Every exit on the machine comes here: a buffer past net.core.rmem_max (SO_RCVBUFFORCE, which
            # the root this needs may set) rides out a build's burst of exits while the reader is busy.
            sock.setsockopt(socket.SOL_SOCKET, getattr(socket, "SO_RCVBUFFORCE", 33), 64 << 20)
            sock.settimeout(5.0)
            name = _attribute(_CTRL_ATTR_FAMILY_NAME, b"TASKSTATS\0")
            sock.send(_request(_GENL_ID_CTRL, _CTRL_CMD_GETFAMILY, name, 1))
            reply = sock.recv(65536)
            family = next(
                (
                    struct.unpack("H", v[:2])[0]
                    for k, v in attributes(reply[20:])
                    if k == _CTRL_ATTR_FAMILY_ID
                ),
                None,
            )
            if family is None:
                sock.close()
                return None
            cpus = f"0-{(os.cpu_count() or 1) - 1}".encode() + b"\0"
            sock.send(_request(family, _TASKSTATS_CMD_GET, _attribute(_REGISTER_CPUMASK, cpus), 2))
        except OSError:  # no CONFIG_TASKSTATS, or not permitted (needs CAP_NET_ADMIN)
            sock.close()
            return None
        listener = cls(sock)
        listener._thread.start()
        return listener

    def _listen(self) -> None:
        self._sock.settimeout(0.2)
        while not self._stopping.is_set():
            try:
                data = self._sock.recv(1 << 20)
            except TimeoutError:
                continue
            except OSError:  # ENOBUFS: records were lost; those processes keep their sampled CPU
                continue
            while len(data) >= 16:
                length = struct.unpack("I", data[:4])[0]
                if length < 16:
                    break
                for whole, ident, cpu in exit_records(data[:length]):
                    (self._processes if whole else self._threads)[ident] = cpu
                data = data[(length + 3) & ~3 :]

    def stop(self, wait_for: int | None = None, timeout_s: float = 2.0) -> None:
        """Stop listening; first wait (up to `timeout_s`) for the exit record of process `wait_for`."""
        deadline = time.monotonic() + timeout_s
        while wait_for is not None and self.cpu_s(wait_for) is None and time.monotonic() < deadline:
            time.sleep(0.02)
        # A multi-threaded process's own record follows its last thread's (each task's record is sent as the
        # task exits): on a loaded machine it can lag by more than a moment, so wait a little for it before
        # taking a thread's record as the process's.
        late = min(deadline, time.monotonic() + 0.5)
        while wait_for is not None and wait_for not in self._processes and time.monotonic() < late:
            time.sleep(0.02)
        time.sleep(0.1)  # the records of the tree's last exits
        self._stopping.set()
        self._thread.join(timeout=2.0)
        self._sock.close()

    def cpu_s(self, pid: int) -> float | None:
        """The exact CPU of process `pid` (a tgid), or None when no record of it arrived. A multi-threaded
        process has a record of its own; a single-threaded one only its one task's."""
        found = self._processes.get(pid)
        return found if found is not None else self._threads.get(pid)
