"""The worker loop (tools/localcloud-providers/PROTOCOL.md): one JSON request a line on stdin, one answer
a line on stdout, dispatched to the provider's handlers. A handler's ProviderError becomes Terraform's
diagnostic; anything else becomes a diagnostic too, its traceback only in the log when TF_LOG is set.
Logs name the method and type, never a value: values carry secrets."""

from __future__ import annotations

import json
import os
import sys
import traceback
from typing import IO, Any

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.errors import NpaError
from npa_pulumi.simulator.tfproviders.base import CallContext, ProviderError, ProviderHandlers, State


def _log(message: str) -> None:
    print(f"npa-localcloud-provider: {message}", file=sys.stderr, flush=True)


def _state(request: dict[str, Any], field: str) -> State:
    value = request.get(field)
    if not isinstance(value, dict):
        raise ProviderError(f"the request's {field!r} is not an object")
    return value


def dispatch(handlers: ProviderHandlers, request: dict[str, Any], cache: dict[str, Any]) -> Any:
    """The result of one request; ProviderError for anything Terraform should show."""
    method, type_name = request.get("method"), str(request.get("type", ""))
    config = request.get("provider_config")
    resource_config = request.get("config") if method in ("create", "update") else None
    ctx = CallContext(
        provider_config=config if isinstance(config, dict) else {},
        cache=cache,
        config=resource_config if isinstance(resource_config, dict) else {},
    )
    if method in ("create", "read", "update", "delete", "import"):
        resource = handlers.resources.get(type_name)
        if resource is None:
            raise ProviderError(f"the local cloud does not serve resource type {type_name!r}")
        if method == "create":
            return resource.create(ctx, _state(request, "planned"))
        if method == "read":
            return resource.read(ctx, _state(request, "state"))
        if method == "update":
            return resource.update(ctx, _state(request, "planned"), _state(request, "prior"))
        if method == "delete":
            resource.delete(ctx, _state(request, "state"))
            return None
        return resource.import_(ctx, str(request.get("import_id", "")))
    if method == "read_data":
        source = handlers.data_sources.get(type_name)
        if source is None:
            raise ProviderError(f"the local cloud does not serve data source {type_name!r}")
        return source.read_data(ctx, _state(request, "config"))
    if method == "open_ephemeral":
        ephemeral = handlers.ephemeral_resources.get(type_name)
        if ephemeral is None:
            raise ProviderError(f"the local cloud does not serve ephemeral resource {type_name!r}")
        return ephemeral.open_ephemeral(ctx, _state(request, "config"))
    raise ProviderError(f"unknown method {method!r}")


def serve(handlers: ProviderHandlers, stdin: IO[str], stdout: IO[str]) -> None:
    """Answer requests until stdin closes (the provider process went away)."""
    cache: dict[str, Any] = {}
    debug = bool(os.environ.get("TF_LOG"))
    for line in stdin:
        if not line.strip():
            continue
        request_id: Any = None
        method: Any = None
        try:
            request = json.loads(line)
            request_id, method = request.get("id"), request.get("method")
            answer: dict[str, Any] = {"id": request_id, "result": dispatch(handlers, request, cache)}
        except ProviderError as err:
            answer = {"id": request_id, "error": {"summary": err.summary, "detail": err.detail}}
        except (CloudError, NpaError) as err:  # the local cloud's own refusal: its words are the diagnostic
            answer = {
                "id": request_id,
                "error": {"summary": str(err).splitlines()[0][:300], "detail": str(err)},
            }
        except Exception as err:  # a bug in a handler: a diagnostic, never a dead worker
            if debug:
                _log(traceback.format_exc())
            answer = {
                "id": request_id,
                "error": {
                    "summary": "The local cloud's provider failed",
                    "detail": f"{type(err).__name__} in {method or 'a request'} (set TF_LOG=DEBUG for the"
                    " traceback in Terraform's log)",
                },
            }
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


def main(argv: list[str]) -> int:
    from npa_pulumi.simulator.tfproviders.registry import PROVIDERS

    if len(argv) != 1 or argv[0] not in PROVIDERS:
        _log(f"usage: python -m npa_pulumi.simulator.tfproviders <{'|'.join(sorted(PROVIDERS))}>")
        return 2
    serve(PROVIDERS[argv[0]], sys.stdin, sys.stdout)
    return 0
