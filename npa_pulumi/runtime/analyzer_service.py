"""Policy analyzers served from the command's shared host (runtime/provider_host.py), one per engine run.

The engine cannot attach to a running analyzer as it can to a provider: every engine run starts the policy
pack's plugin (`pulumi-analyzer-policy-python`, which runs `$PULUMI_PYTHON_CMD -u -m pulumi.policy ENGINE
.` in the pack's directory), and every one of them imported the Pulumi SDK, pulumi-policy, grpc and the
pack again (~0.3 s of CPU per stack operation, twice per `up` of one cluster). `$PULUMI_PYTHON_CMD` is our
own wrapper (engine/automation/workspace.py), so the plugin the engine starts can be a thin proxy instead
(runtime/analyzer_relay.py, started without the site packages): it asks
this service, over a Unix socket the orchestrator names in `NPA_ANALYZER_SOCKET`, for an analyzer of its
pack, prints that analyzer's port as the pack would have printed its own, and lives until the engine is
done with it.

Each request gets an analyzer of its own: a fresh `_PolicyAnalyzerServicer` (pulumi-policy's, so policies
are evaluated exactly as in the pack's own process) on a gRPC port of its own. The servicer holds what the
engine configures per run (the stack's tags, the policy config), so nothing of one stack reaches another's
analysis. The pack itself — its `__main__` run once, its `PolicyPack(...)` arguments kept — is loaded on the
first request. It is stopped when the proxy's connection closes: the engine killed the proxy at the end of
its run, or the engine is gone.

Only the packs the orchestrator lists (`NPA_SHARED_POLICY_PACKS`: the product's own) are served here; for
any other pack, or when anything here fails, the proxy runs the pack in its own process as before.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import os
import runpy
import socket
import sys
import threading
from collections.abc import Mapping
from concurrent import futures
from pathlib import Path
from typing import Any

log = logging.getLogger("npa_pulumi.analyzer_service")

PACKS_ENV = "NPA_SHARED_POLICY_PACKS"


class _Pack:
    """A policy pack's `PolicyPack(...)` arguments, from one run of its `__main__`."""

    def __init__(self, directory: Path) -> None:
        import pulumi_policy
        import pulumi_policy.policy as policy_module

        captured: list[dict[str, Any]] = []
        real = policy_module.PolicyPack
        signature = inspect.signature(real.__init__)

        class _Captured(real):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, **kwargs: Any) -> None:  # instead of serving
                bound = signature.bind(self, *args, **kwargs)
                bound.apply_defaults()
                captured.append({k: v for k, v in bound.arguments.items() if k != "self"})

        pulumi_policy.PolicyPack = policy_module.PolicyPack = _Captured  # type: ignore[misc]
        saved_path = list(sys.path)
        try:
            sys.path.insert(0, str(directory))
            runpy.run_path(str(directory / "__main__.py"), run_name="__main__")
        finally:
            pulumi_policy.PolicyPack = policy_module.PolicyPack = real  # type: ignore[misc]
            sys.path[:] = saved_path
        if len(captured) != 1:
            raise RuntimeError(f"{directory} built {len(captured)} policy packs, expected one")
        self.arguments = captured[0]

    def servicer(self) -> Any:
        from google.protobuf import empty_pb2
        from pulumi_policy.policy import EnforcementLevel, _PolicyAnalyzerServicer

        class Servicer(_PolicyAnalyzerServicer):
            def Cancel(self, request: Any, context: Any) -> Any:
                return empty_pb2.Empty()  # nothing runs long here; the generated one raises (logged)

        a = self.arguments
        return Servicer(
            a["name"],
            "0.0.1",  # what PolicyPack reports too; the engine takes PulumiPolicy.yaml's version
            a["policies"],
            a["enforcement_level"] if a["enforcement_level"] is not None else EnforcementLevel.ADVISORY,
            a["initial_config"],
            a["description"],
            a["display_name"],
            a["readme"],
            a["provider"],
            a["tags"],
            a["repository"],
        )


class AnalyzerService:
    def __init__(self, path: str, packs: list[str], env: Mapping[str, str] | None = None) -> None:
        self.path = path
        self._env = dict(env or {})  # the engines' environment, when served in the orchestrator
        self.allowed = {os.path.realpath(p) for p in packs if p}
        self._packs: dict[str, _Pack] = {}
        self._lock = threading.Lock()
        self._socket = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        self._socket.bind(path)
        os.chmod(path, 0o600)
        self._socket.listen(64)

    def start(self) -> None:
        threading.Thread(target=self._accept, name="npa-analyzers", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._socket.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), name="npa-analyzer", daemon=True).start()

    def _pack(self, directory: str) -> _Pack:
        with self._lock:
            if directory not in self._packs:
                self._packs[directory] = _Pack(Path(directory))
            return self._packs[directory]

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            reader = conn.makefile("rb")
            try:
                request = json.loads(reader.readline() or b"{}")
                directory = os.path.realpath(str(request.get("pack", "")))
                if directory not in self.allowed:
                    conn.sendall(b'{"fallback": "not a shared pack"}\n')
                    return
                server = self._start_analyzer(self._pack(directory), self._env)
            except Exception as err:  # the proxy runs the pack itself: slower, never wrong
                log.exception("no shared analyzer")
                with contextlib.suppress(OSError):
                    conn.sendall(json.dumps({"fallback": f"{type(err).__name__}: {err}"}).encode() + b"\n")
                return
            port, grpc_server = server
            try:
                conn.sendall(json.dumps({"port": port}).encode() + b"\n")
                log.info("analyzer for %s on port %d", directory, port)
                while reader.read(4096):  # until the proxy is gone
                    pass
            except OSError:
                pass
            finally:
                grpc_server.stop(0)
                log.info("analyzer on port %d stopped", port)

    @staticmethod
    def _start_analyzer(pack: _Pack, env: Mapping[str, str]) -> tuple[int, Any]:
        import grpc
        from pulumi.runtime.proto import analyzer_pb2_grpc
        from pulumi_policy.policy import _GRPC_CHANNEL_OPTIONS

        from npa_pulumi.runtime import sdk_context

        # Every call in a context of its own, as in the pack's own process (runtime/sdk_context.py).
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=4),
            options=_GRPC_CHANNEL_OPTIONS,
            interceptors=[sdk_context.interceptor(env)],
        )
        analyzer_pb2_grpc.add_AnalyzerServicer_to_server(pack.servicer(), server)
        port = server.add_insecure_port(address="127.0.0.1:0")
        server.start()
        return port, server

    def close(self) -> None:
        """Stop accepting, and remove the socket and its private directory (the orchestrator made it for
        this host alone; it removes it too, unless it was killed)."""
        with contextlib.suppress(OSError):
            self._socket.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        with contextlib.suppress(OSError):
            os.rmdir(os.path.dirname(self.path))  # only when empty
