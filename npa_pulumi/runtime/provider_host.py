"""One dynamic-provider host for a whole CLI run: `ProviderServer`, served by the orchestrator itself (the
default, engine/automation/provider_host.py) or by a process of its own, `python -m
npa_pulumi.runtime.provider_host`.

The engine starts a Python host for the dynamic providers (`pulumi-resource-pulumi-python`, then
`python -m pulumi.dynamic`) in every engine run that registers a dynamic resource, and every one of them
imports the Pulumi SDK, grpc and the provider's modules again: about 0.5-0.9 s of CPU per stack operation,
the largest single cost of a stack. The engine can instead *attach* to a provider that is already serving:
`PULUMI_DEBUG_PROVIDERS=pulumi-python:<port>` (pkg/resource/plugin/provider_plugin.go,
`GetProviderAttachPort`: the engine dials the port, sends `Attach`, and never starts or kills a process for
that package). The orchestrator serves (or starts) this host once per command and every engine run of the
command attaches to it. The same server serves the product's policy pack to every engine run
(runtime/analyzer_service.py).

What it serves is the SDK's own `DynamicResourceProviderServicer` (loaded from `pulumi.dynamic.__main__`
without running that module's `main()`, so requests are handled exactly as in a host the engine starts),
with four differences:

* `Attach` is accepted (the SDK's host never needed it: the engine only attaches when told to);
* `Configure` keeps no state: it is called by every engine that attaches, and the SDK stores the config on
  the one servicer, where one stack's configuration would reach another stack's providers. The fleet's
  dynamic providers take no provider configuration; everything they need is in their inputs;
* every call runs in a fresh context that holds what the SDK's host would configure, and the SDK's own
  per-call configure is off (runtime/sdk_context.py: in the orchestrator it would reset settings that its
  inline programs read);
* the request pool is large (the SDK's host has 4 workers, one engine's worth): with `-j N`, N stacks'
  terraform applies run in it at once, each holding a worker for minutes.

Supervision (runtime/supervision.py). In the orchestrator, terraform is bound to it
(`bind_children_to_this_process`: a process group of its own, and a guard that sends it one SIGINT when
the orchestrator dies). A host process's stdin is a pipe from the orchestrator: when the orchestrator
closes it (the command is over) or dies (the pipe closes with it, or this process is reparented), every
running terraform gets SIGINT and time to write its state, and the host exits. It runs in a process group
of its own, like the engine's plugins, so a Ctrl-C or a SIGKILL of the CLI's process group reaches the
engines, not the terraform runs in here.
"""

from __future__ import annotations

import ast
import importlib.util
import logging
import os
import sys
import threading
import time
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from npa_pulumi.runtime import analyzer_service, sdk_context, supervision
from npa_pulumi.runtime.analyzer_relay import SOCKET_ENV
from npa_pulumi.runtime.interpreter import tune_for_a_command

log = logging.getLogger("npa_pulumi.provider_host")

PACKAGE = "pulumi-python"  # the engine's name for the Python dynamic-provider plugin
ATTACH_ENV = "PULUMI_DEBUG_PROVIDERS"
MAX_WORKERS = 64
POLL_S = 0.5


def load_sdk_host() -> types.ModuleType:
    """`pulumi.dynamic.__main__` as a module, minus its closing top-level `main()` call (which would start
    the SDK's own server). Fails loudly if the SDK's host no longer has that shape."""
    spec = importlib.util.find_spec("pulumi.dynamic.__main__")
    if spec is None or spec.origin is None:
        raise RuntimeError("the Pulumi SDK has no pulumi.dynamic.__main__")
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"), spec.origin)

    def is_main_call(node: ast.stmt) -> bool:
        return (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
            and node.value.func.id == "main"
        )

    kept = [node for node in tree.body if not is_main_call(node)]
    if len(kept) != len(tree.body) - 1:
        raise RuntimeError(f"unexpected shape of {spec.origin}: expected exactly one top-level main() call")
    tree.body = kept
    module = types.ModuleType("npa_pulumi._sdk_dynamic_host")
    module.__file__ = spec.origin
    exec(compile(tree, spec.origin, "exec"), module.__dict__)
    for name in ("DynamicResourceProviderServicer", "configure", "Settings"):
        if not hasattr(module, name):
            raise RuntimeError(f"{spec.origin} defines no {name}")
    # Its get_provider() configures the SDK's settings on every call; here every call already runs in a
    # fresh context holding exactly those settings (runtime/sdk_context.py), and configuring them again
    # would reset the process-wide defaults that an inline program in the same process reads.
    setattr(module, "configure", lambda _settings: None)  # noqa: B010 - names the SDK's module defines
    setattr(module, "Settings", lambda **_options: None)  # noqa: B010
    return module


def unimplemented(context: Any, response: Any) -> Any:
    """What the SDK's generated servicer answers, without raising (grpc logs a raised one as an error)."""
    import grpc

    context.set_code(grpc.StatusCode.UNIMPLEMENTED)
    context.set_details("not implemented")
    return response()


def make_servicer(sdk: types.ModuleType) -> Any:
    from google.protobuf import empty_pb2

    base: type = sdk.DynamicResourceProviderServicer
    proto = sdk.proto

    class SharedServicer(base):  # type: ignore[misc]
        def Handshake(self, request: Any, context: Any) -> Any:
            return unimplemented(context, proto.ProviderHandshakeResponse)

        def Attach(self, request: Any, context: Any) -> Any:
            return empty_pb2.Empty()

        def Configure(self, request: Any, context: Any) -> Any:
            return proto.ConfigureResponse(acceptSecrets=False)

        def Create(self, request: Any, context: Any) -> Any:
            log.info("create %s", request.urn)
            return super().Create(request, context)

        def Update(self, request: Any, context: Any) -> Any:
            log.info("update %s", request.urn)
            return super().Update(request, context)

        def Delete(self, request: Any, context: Any) -> Any:
            log.info("delete %s", request.urn)
            return super().Delete(request, context)

        def Read(self, request: Any, context: Any) -> Any:
            log.info("read %s", request.urn)
            return super().Read(request, context)

    return SharedServicer()


class ProviderServer:
    """The dynamic providers on a port of this process, and (given a socket) the shared policy packs'
    analyzers: what the host process below serves, and what the orchestrator serves itself
    (engine/automation/provider_host.py)."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self._env = dict(env or {})
        self._server: Any = None
        self._analyzers: analyzer_service.AnalyzerService | None = None

    def start(self, socket_path: str | None = None, packs: list[str] | None = None) -> int:
        from concurrent import futures

        import grpc

        # The SDK's package, whole, before any of its submodules: this may run beside a thread that is
        # importing it too (the first inline program), and starting at a submodule there meets the package's
        # import cycle half-done ("cannot import name 'SETTINGS' from partially initialized module").
        import pulumi  # noqa: F401

        sdk_context.check()
        sdk = load_sdk_host()
        self._server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=MAX_WORKERS, thread_name_prefix="npa-provider"),
            options=sdk._GRPC_CHANNEL_OPTIONS,
            interceptors=[sdk_context.interceptor(self._env)],
        )
        sdk.provider_pb2_grpc.add_ResourceProviderServicer_to_server(make_servicer(sdk), self._server)
        port = int(self._server.add_insecure_port(address="127.0.0.1:0"))
        self._server.start()
        if socket_path:
            self._analyzers = analyzer_service.AnalyzerService(socket_path, list(packs or []), self._env)
            self._analyzers.start()
        log.info("serving on 127.0.0.1:%d, pid %d", port, os.getpid())
        return port

    def stop(self, why: str) -> None:
        """Stop serving: the analyzers, then every terraform still running (SIGINT, then up to
        supervision.GRACE_S to write its state), then the server."""
        started = time.monotonic()
        if self._analyzers is not None:
            self._analyzers.close()
        supervision.stop_all(supervision.GRACE_S)  # nothing runs after a command that finished
        if self._server is not None:
            self._server.stop(grace=1.0)
        log.info("stopped (%s) in %.1fs", why, time.monotonic() - started)


def _await_end(parent: int) -> str:
    """Block until the orchestrator closes our stdin or is gone; returns which."""
    closed = threading.Event()

    def read_stdin() -> None:
        try:
            while sys.stdin.buffer.read(4096):
                pass
        except (OSError, ValueError):
            pass
        closed.set()

    threading.Thread(target=read_stdin, name="npa-stdin", daemon=True).start()
    while not closed.wait(POLL_S):
        if os.getppid() != parent:
            return "the orchestrator is gone"
    return "stdin closed" if os.getppid() == parent else "the orchestrator is gone"


def main() -> int:
    tune_for_a_command()  # before the Pulumi SDK and grpc load
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s provider-host %(levelname)s %(message)s"
    )
    parent = os.getppid()
    server = ProviderServer()
    socket_path = os.environ.get(SOCKET_ENV)
    if socket_path:
        # This process is supervised by the orchestrator; the pack's own watchdog (which watches an
        # engine) must not start here.
        supervision.supervised_elsewhere()
    port = server.start(socket_path, os.environ.get(analyzer_service.PACKS_ENV, "").split(os.pathsep))
    sys.stdout.write(f"{port}\n")
    sys.stdout.flush()
    log.info("a host of its own, for the orchestrator %d", parent)
    why = _await_end(parent)
    server.stop(why)
    logging.shutdown()
    return 0 if why == "stdin closed" else 70


if __name__ == "__main__":
    # Not sys.exit: a provider call still waiting on the cloud would keep a worker thread, and the
    # interpreter's exit would wait for it.
    os._exit(main())
