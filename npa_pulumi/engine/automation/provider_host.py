"""The command's one dynamic-provider host, attached to by every engine run (what it serves, and why:
runtime/provider_host.py).

    host = SharedProviderHost(settings.env, work_dir, log_path)
    env = host.attach_env()   # {"PULUMI_DEBUG_PROVIDERS": "pulumi-python:<port>"}; {} when it cannot start
    ...                       # engine runs with env
    host.close()              # at the end of the command (also at interpreter exit)

By default the orchestrator serves the providers and the product's policy pack itself, on a port of its
own process (`HostMode.IN_PROCESS`): the engines attach to it exactly as they would to a host process, and
no interpreter has to start and import the Pulumi SDK, grpc and the providers again for every command (about
0.45 s of CPU per command, the largest cost above a cluster stack's floor). The providers then see the
engines' environment through runtime/provider_env.py, and their terraform runs are bound to this process
(runtime/supervision.py `bind_children_to_this_process`: a process group of their own, SIGINT if the
orchestrator dies). `NPA_SHARED_PROVIDER_HOST=process` serves them from a host process instead (started
from the engines' environment, in the engine's work directory, stopped when its stdin closes), and
`NPA_SHARED_PROVIDER_HOST=0` turns sharing off: every engine run starts its own host, as Pulumi does. If
the host cannot start, the engines start their own hosts as before: slower, never wrong.
"""

from __future__ import annotations

import atexit
import contextlib
import enum
import logging
import os
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from npa_pulumi.runtime.analyzer_relay import SOCKET_ENV
from npa_pulumi.runtime.analyzer_service import PACKS_ENV
from npa_pulumi.runtime.provider_host import ATTACH_ENV, PACKAGE, ProviderServer

log = logging.getLogger(__name__)

# What the host's code logs to its log file (runtime/provider_host.py, runtime/analyzer_service.py).
HOST_LOGGERS = ("npa_pulumi.provider_host", "npa_pulumi.analyzer_service")
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 70.0  # past the host's own grace for a terraform still running (supervision.GRACE_S)
ENABLE_ENV = "NPA_SHARED_PROVIDER_HOST"


class HostMode(enum.Enum):
    IN_PROCESS = "in-process"  # the orchestrator serves the providers (the default)
    PROCESS = "process"  # a host process of the command's own
    OFF = "off"  # every engine run starts its own host, as Pulumi does by default


def host_mode(environ: Mapping[str, str] = os.environ) -> HostMode:
    value = environ.get(ENABLE_ENV, "").strip().lower()
    if value in ("0", "false", "no", "off"):
        return HostMode.OFF
    if value == HostMode.PROCESS.value:
        return HostMode.PROCESS
    return HostMode.IN_PROCESS


def attach_value(port: int, current: str | None) -> str:
    """`PULUMI_DEBUG_PROVIDERS` with the Python dynamic provider at `port`, keeping any other provider the
    user attaches for debugging (an entry of their own for pulumi-python wins)."""
    entries = [e for e in (current or "").split(",") if e.strip()]
    if any(e.split(":", 1)[0] == PACKAGE for e in entries):
        return ",".join(entries)
    return ",".join([*entries, f"{PACKAGE}:{port}"])


class SharedProviderHost:
    def __init__(
        self,
        env: Callable[[], Mapping[str, str]],
        cwd: Path,
        log_path: Path,
        policy_packs: list[str] | None = None,
        mode: HostMode = HostMode.IN_PROCESS,
    ) -> None:
        self._env = env
        self._mode = mode
        self._server: ProviderServer | None = None  # IN_PROCESS: served here
        self._log_handler: logging.Handler | None = None
        self._policy_packs = list(policy_packs or [])  # the packs it serves to every engine run
        self._socket_dir: str | None = None
        self._cwd = cwd
        self._log_path = log_path
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._port: int | None = None
        self._failed = False
        self._atexit = False

    @property
    def pid(self) -> int | None:
        """The host's process: this one when the orchestrator serves the providers itself."""
        if self._server is not None:
            return os.getpid()
        return self._proc.pid if self._proc is not None else None

    def warm(self) -> None:
        """Start a host process in the background (it takes ~0.5 s), so the first engine run finds it ready;
        that run's `attach_env` waits for it. For a command that is known to run the engine. Serving here
        needs no warming: it takes milliseconds once the SDK is loaded, which the first program does."""
        if self._mode is HostMode.IN_PROCESS:
            return
        with self._lock:
            if self._port is not None or self._failed:
                return
        threading.Thread(target=self.attach_env, name="npa-provider-host-start", daemon=True).start()

    def attach_env(self) -> dict[str, str]:
        """What the engine's environment needs to attach to the host, starting it if needed."""
        with self._lock:
            if self._port is None and not self._failed:
                try:
                    self._start()
                except (OSError, RuntimeError) as err:
                    self._failed = True
                    log.warning("no shared provider host (%s): each engine run starts its own", err)
                    self._stop_locked()
            if self._port is None:
                return {}
            env = {ATTACH_ENV: attach_value(self._port, self._env().get(ATTACH_ENV))}
            socket_path = self._socket_path()
            if socket_path is not None:
                env[SOCKET_ENV] = socket_path
            return env

    def _start(self) -> None:
        if self._policy_packs:
            # A short private path: a Unix socket's path is limited to ~100 bytes.
            self._socket_dir = tempfile.mkdtemp(prefix="npa-")
        if not self._atexit:
            atexit.register(self.close)
            self._atexit = True
        from npa_pulumi.runtime import supervision

        if self._mode is HostMode.IN_PROCESS and supervision.bind_children_to_this_process():
            try:
                self._start_here()
                return
            except RuntimeError as err:  # an SDK whose shape sdk_context does not know: a process serves
                log.warning("serving the providers in a host process (%s)", err)
                self._stop_here()
        self._start_process()

    def _provider_env(self) -> dict[str, str]:
        """The engines' environment overrides, as the providers must see them (not the attach settings)."""
        env = dict(self._env())
        env.pop(ATTACH_ENV, None)
        env.pop(SOCKET_ENV, None)
        return env

    def _socket_path(self) -> str | None:
        return os.path.join(self._socket_dir, "analyzers.sock") if self._socket_dir is not None else None

    def _start_here(self) -> None:
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path.touch(mode=0o600, exist_ok=True)
        self._log_path.chmod(0o600)
        handler = logging.FileHandler(self._log_path, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s provider-host %(levelname)s %(message)s"))
        for name in HOST_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(handler)
            logger.setLevel(logging.INFO)
            logger.propagate = False  # the host's log, not the command's stderr
        self._log_handler = handler
        server = ProviderServer({**self._provider_env(), "PULUMI_PROJECT": "npa-fleet"})
        self._server = server
        self._port = server.start(self._socket_path(), self._policy_packs)
        log.debug("the orchestrator serves its dynamic providers on port %d", self._port)

    def _start_process(self) -> None:
        env = {**os.environ, **self._provider_env()}
        socket_path = self._socket_path()
        if socket_path is not None:
            env[SOCKET_ENV] = socket_path
            env[PACKS_ENV] = os.pathsep.join(self._policy_packs)
        env.setdefault("PULUMI_PROJECT", "npa-fleet")  # what the engine tells a host it starts
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._log_path.open("ab") as err:
            self._log_path.chmod(0o600)
            self._proc = subprocess.Popen(
                [sys.executable, "-u", "-m", "npa_pulumi.runtime.provider_host"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=env,
                cwd=self._cwd,
                process_group=0,  # like the engine's plugins: a Ctrl-C reaches the engines, not terraform
            )
        assert self._proc.stdout is not None
        deadline = time.monotonic() + START_TIMEOUT_S
        line = b""
        while not line.endswith(b"\n"):
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._proc.stdout], [], [], max(0.0, remaining))
            if not ready:
                raise RuntimeError(f"it did not report a port within {START_TIMEOUT_S:.0f}s")
            chunk = os.read(self._proc.stdout.fileno(), 64)
            if not chunk:
                raise RuntimeError(f"it exited with {self._proc.wait()}; see {self._log_path}")
            line += chunk
        text = line.decode(errors="replace").strip()
        if not text.isdigit():
            raise RuntimeError(f"it reported {text!r} instead of a port")
        self._port = int(text)
        log.debug("shared provider host pid %d on port %d", self._proc.pid, self._port)

    def close(self) -> None:
        """Stop the host (it stops any terraform still running first); the next `attach_env` starts a new
        one."""
        with self._lock:
            self._stop_locked()
            self._failed = False

    def _stop_locked(self) -> None:
        if self._server is not None:
            self._stop_here()
        else:
            self._stop_process()
        self._remove_socket_dir()

    def _stop_process(self) -> None:
        proc, self._proc, self._port = self._proc, None, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def _stop_here(self) -> None:
        server, self._server, self._port = self._server, None, None
        if server is not None:
            server.stop("the command is over")
        self._detach_log()

    def _remove_socket_dir(self) -> None:
        if self._socket_dir is not None:
            shutil.rmtree(self._socket_dir, ignore_errors=True)
            self._socket_dir = None

    def _detach_log(self) -> None:
        handler, self._log_handler = self._log_handler, None
        if handler is None:
            return
        for name in HOST_LOGGERS:
            logging.getLogger(name).removeHandler(handler)
        handler.close()
