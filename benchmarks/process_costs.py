"""Where a stack operation's CPU goes: a sampler of every process in the CLI's session.

The engine starts its plugins in process groups of their own but in the CLI's session, so every process of
an operation (the orchestrator, the engine, the Python dynamic-provider and policy hosts, terraform and its
provisioners, the Kubernetes provider) shares the CLI's session id. Every `period_s` the sampler reads
/proc for each of them: its kind (from its command line) and its CPU so far (utime + stime). Where the
kernel's exit accounting can be read (`exit_accounting.py`: Linux, as root), a process's cost is its exact
CPU at exit (`Breakdown.exact`); elsewhere its last reading, which misses what it spent after that reading.
Processes that live shorter than one period are missed either way (their CPU still shows in the whole
tree's total, `tree_cpu_s`, from wait4), so the breakdown is a lower bound per kind. An
engine process is named by its subcommand (`engine up`, `engine stack init`): which of them a stack
operation needs is what its floor is made of (scenarios.stack_floor).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.exit_accounting import ExitAccounting

_TICK = os.sysconf("SC_CLK_TCK")


def kind_of(argv: list[str]) -> str:
    if not argv:
        return ""  # a zombie: see run()
    exe = Path(argv[0]).name
    joined = " ".join(argv)
    if exe == "pulumi":
        return f"engine {engine_subcommand(argv[1:])}".rstrip()
    if exe.startswith("pulumi-resource-kubernetes") or ("plugin_guard" in joined and "kubernetes" in joined):
        return "kubernetes provider"
    if exe in ("terraform", "tofu"):
        return "terraform"
    if "npa_pulumi.simulator.api" in joined:
        return "local-cloud api (provisioners)"
    if "pulumi.dynamic" in joined or "npa_pulumi.runtime.provider_host" in joined:
        return "dynamic-provider host"
    if "pulumi.policy" in joined or "pulumi-analyzer" in joined:
        return "policy analyzer"
    if "npa_pulumi.cli.main" in joined:
        return "orchestrator"
    if exe in ("sh", "bash", "dash"):
        return "shell"
    if any(Path(a).name.startswith("pulumi-analyzer") for a in argv):
        return "policy analyzer"
    if any(Path(a).name.startswith(("pulumi-resource-pulumi", "pulumi-language")) for a in argv):
        return "dynamic-provider host"
    if exe.startswith("python") and "-m" in argv[:-1]:
        return f"python -m {argv[argv.index('-m') + 1]}"
    return exe if not exe.startswith("python") else f"python {Path(argv[1]).name if len(argv) > 1 else ''}"


def engine_subcommand(args: list[str]) -> str:
    """`up`, `destroy`, `stack init`, `stack rm`, ... from the engine's arguments (flags skipped)."""
    words = [a for a in args if not a.startswith("-")][:2]
    if words and words[0] in ("stack", "plugin", "config"):
        return " ".join(words)
    return words[0] if words else ""


@dataclass
class Breakdown:
    cpu_s: dict[str, float] = field(default_factory=dict)
    processes: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    code: int = 0
    tree_cpu_s: float = 0.0  # user + system CPU of the CLI and every descendant it waited for (wait4)
    exact: bool = False  # each process's CPU from the kernel's exit accounting, not its last reading

    def cpu_s_costliest_first(self) -> dict[str, float]:
        return dict(sorted(self.cpu_s.items(), key=lambda kv: -kv[1]))


def _read(pid: int) -> tuple[str, float] | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[-1].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICK
    return kind_of([a.decode(errors="replace") for a in argv if a]), cpu


def run(argv: list[str], env: Mapping[str, str], cwd: Path, period_s: float = 0.05) -> Breakdown:
    accounting = ExitAccounting.start()
    started = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        env=dict(env),
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    seen: dict[int, tuple[str, float]] = {}
    while True:
        reaped, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if reaped:
            proc.returncode = os.waitstatus_to_exitcode(status)
            break
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            try:
                if os.getsid(pid) != proc.pid:
                    continue
            except OSError:
                continue
            reading = _read(pid)
            if reading is not None:
                kind, cpu = reading
                if not kind and pid in seen:  # exited, not yet reaped: no command line any more
                    kind = seen[pid][0]
                seen[pid] = (kind or "other", cpu)
        time.sleep(period_s)
    wall_s = time.perf_counter() - started
    if accounting is not None:
        accounting.stop(wait_for=proc.pid)
        for pid, (kind, cpu) in seen.items():
            # Never below a reading: a record can be lost (a busy machine overflows the socket), and a
            # multi-threaded process whose own record was lost leaves only its main thread's.
            exact = accounting.cpu_s(pid)
            seen[pid] = (kind, cpu if exact is None else max(cpu, exact))
    result = Breakdown(
        wall_s=wall_s,
        code=proc.returncode,
        tree_cpu_s=round(usage.ru_utime + usage.ru_stime, 2),
        exact=accounting is not None,
    )
    for kind, cpu in seen.values():
        result.cpu_s[kind] = round(result.cpu_s.get(kind, 0.0) + cpu, 2)
        result.processes[kind] = result.processes.get(kind, 0) + 1
    return result
