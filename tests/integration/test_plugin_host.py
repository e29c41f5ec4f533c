"""The engine's Python plugin hosts start through `npa_pulumi.runtime.plugin_host`: a host whose run dies
before it received a single request exits by itself, and anything that is not a plugin host passes
through to the real interpreter."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from npa_pulumi.engine.automation.workspace import plugin_python_wrapper
from npa_pulumi.runtime.plugin_host import plugin_module


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"  # exited; its new parent may never reap it


def test_plugin_module_recognises_only_plugin_hosts() -> None:
    assert plugin_module(["-u", "-m", "pulumi.dynamic", "127.0.0.1:1"]) == ("pulumi.dynamic", ["127.0.0.1:1"])
    assert plugin_module(["-m", "pulumi.policy", "x", "."]) == ("pulumi.policy", ["x", "."])
    assert plugin_module(["-u", "-m", "http.server"]) is None
    assert plugin_module(["-c", "print(1)"]) is None
    assert plugin_module([]) is None


def test_other_invocations_pass_through(isolated_home: Path) -> None:
    wrapper = plugin_python_wrapper()
    out = subprocess.run([wrapper, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == sys.executable


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs to follow the host")
def test_a_host_whose_run_died_before_any_request_exits(isolated_home: Path) -> None:
    wrapper = plugin_python_wrapper()
    # The "engine": starts a dynamic-provider host, waits for its port line, then is SIGKILLed.
    engine = (
        "import subprocess, sys, time\n"
        f"host = subprocess.Popen([{wrapper!r}, '-u', '-m', 'pulumi.dynamic', '127.0.0.1:1'],"
        " stdout=subprocess.PIPE, start_new_session=True)\n"
        "print(host.pid, flush=True)\n"
        "print('port', host.stdout.readline().decode().strip(), flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", engine], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    host_pid = int(proc.stdout.readline())
    try:
        port_line = proc.stdout.readline().split()
        assert port_line[0] == "port" and port_line[1].isdigit(), port_line  # serving, no request yet
        assert not _gone(host_pid)
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while not _gone(host_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _gone(host_pid), "the plugin host outlived the run that started it"
    finally:
        if not _gone(host_pid):
            os.kill(host_pid, 9)


# ------------------------------------------------------------------ the command's shared provider host

TWO_CLUSTERS = """\
apiVersion: npa.fleet/v0.0.1
name: shared
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - project_id: project-existing1
    clusters:
      - name: c1
      - name: c2
"""


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "npa_pulumi.cli.main", *args]


def _host_log(home: Path) -> Path:
    return home / ".npa-pulumi" / "logs" / "shared" / "provider-host.log"


def _host_pids(log: Path) -> list[int]:
    text = log.read_text() if log.exists() else ""
    return [int(line.split(" pid ")[1].split(",")[0]) for line in text.splitlines() if "serving on" in line]


def _session_processes(session: int, name: str) -> list[int]:
    """The processes of a session whose command is `name` (a killed CLI's session outlives it)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        command = stat[stat.index("(") + 1 : stat.rfind(")")]
        if command == name and int(fields[3]) == session and fields[0] not in "ZX":
            found.append(int(entry.name))
    return found


@pytest.mark.parametrize("mode", ["in-process", "process"])
def test_one_shared_host_serves_every_stack_of_a_command(
    isolated_home: Path, tmp_path: Path, mode: str
) -> None:
    """Both cluster stacks (and the project stack) of an `up -j 2` are served by the one host of the
    command: by default the orchestrator itself, with `NPA_SHARED_PROVIDER_HOST=process` a host process it
    started, which is gone when the command is. Every stack's creates and policy analyses go through it."""
    from npa_pulumi.runtime.home import logs_dir

    spec = tmp_path / "fleet.yaml"
    spec.write_text(TWO_CLUSTERS)
    env = {**os.environ, "NPA_SHARED_PROVIDER_HOST": "process" if mode == "process" else ""}
    subprocess.run(_cli("local-cloud", "init"), check=True, capture_output=True)
    cli = subprocess.Popen(
        _cli("up", "--spec", str(spec), "--yes", "-j", "2"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    _, stderr = cli.communicate(timeout=600)
    assert cli.returncode == 0, stderr[-3000:]
    log = logs_dir("shared") / "provider-host.log"
    assert log == _host_log(isolated_home)
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    text = log.read_text()
    hosts = _host_pids(log)
    assert len(hosts) == 1, text  # one host for the whole command
    for stack in (
        "shared.project-existing1::",
        "shared.project-existing1.c1::",
        "shared.project-existing1.c2::",
    ):
        assert f"create urn:pulumi:{stack}" in text, text  # every stack's creates went through it
    assert text.count("analyzer for ") == 3  # the policy pack, once per engine run, from the same host
    if mode == "process":
        assert hosts[0] != cli.pid
        assert "stopped (stdin closed)" in text
        assert _gone(hosts[0])
    else:
        assert hosts == [cli.pid]  # the orchestrator served its providers itself
        assert "stopped (the command is over)" in text
    destroy = subprocess.run(
        _cli("destroy", "--spec", str(spec), "--yes"), capture_output=True, text=True, env=env
    )
    assert destroy.returncode == 0, destroy.stderr[-3000:]
    assert len(_host_pids(log)) == 2  # the destroy had its own
    assert "delete urn:pulumi:shared.project-existing1.c2::" in log.read_text()


def test_without_the_shared_host_engines_start_their_own(isolated_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(TWO_CLUSTERS.replace("      - name: c2\n", ""))
    subprocess.run(_cli("local-cloud", "init"), check=True, capture_output=True)
    env = {**os.environ, "NPA_SHARED_PROVIDER_HOST": "0"}
    up = subprocess.run(_cli("up", "--spec", str(spec), "--yes"), capture_output=True, text=True, env=env)
    assert up.returncode == 0, up.stderr[-3000:]
    assert not _host_log(isolated_home).exists()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs procfs to follow the host")
# The host process (the fallback) in `make test-long`; `make test` kills the default, in-process serving.
@pytest.mark.parametrize("mode", ["in-process", pytest.param("process", marks=pytest.mark.long)])
def test_the_shared_host_and_its_terraform_stop_when_the_cli_is_killed(
    isolated_home: Path, tmp_path: Path, mode: str
) -> None:
    """CI cancelling a job: SIGKILL to the CLI's process group while a cluster stack's terraform applies.
    Terraform is in a process group of its own, so the kill does not reach it; it gets one SIGINT from its
    supervisor (the host process, or the kernel's parent-death signal when the orchestrator served the
    providers itself), stops, and leaves its state and lock so that the next `up` completes the cluster."""
    import signal

    spec = tmp_path / "fleet.yaml"
    spec.write_text(TWO_CLUSTERS.replace("      - name: c2\n", ""))
    env = {**os.environ, "NPA_SHARED_PROVIDER_HOST": "process" if mode == "process" else ""}
    subprocess.run(_cli("local-cloud", "init"), check=True, capture_output=True)
    # Slow provisioning: the cluster stack's terraform apply is running in the host when the CLI dies.
    subprocess.run(_cli("local-cloud", "set", "provisioning-seconds", "20"), check=True, capture_output=True)
    log = _host_log(isolated_home)
    cli = subprocess.Popen(
        _cli("up", "--spec", str(spec), "--yes"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 240
        while "create urn:pulumi:shared.project-existing1.c1::" not in (
            log.read_text() if log.exists() else ""
        ):
            assert cli.poll() is None, "the CLI ended before its cluster stack started"
            assert time.monotonic() < deadline, "the cluster stack's create never reached the shared host"
            time.sleep(0.2)
        time.sleep(2)  # terraform is applying
        host = _host_pids(log)[0]
        assert not _gone(host)
        terraform = _session_processes(cli.pid, "terraform")
        assert terraform, "no terraform running in the CLI's session"
    finally:
        os.killpg(cli.pid, signal.SIGKILL)  # the CLI and its engines, as CI cancelling a job
        cli.wait()
    # Terraform gets SIGINT and up to supervision.GRACE_S (60 s) to finish writing its state; slack for load.
    deadline = time.monotonic() + 180
    while not all(_gone(pid) for pid in [host, *terraform]) and time.monotonic() < deadline:
        time.sleep(0.2)
    try:
        assert all(_gone(pid) for pid in terraform), "terraform outlived the CLI that started it"
        assert _gone(host), "the shared provider host outlived the CLI that started it"
        if mode == "process":
            # A SIGKILLed CLI closes the host's stdin as it exits, and may still be its parent at that
            # instant: either way of noticing is the host stopping because its orchestrator ended.
            text = log.read_text()
            assert "stopped (the orchestrator is gone)" in text or "stopped (stdin closed)" in text
    finally:
        for pid in [host, *terraform]:
            if not _gone(pid):
                os.kill(pid, 9)
    # Nothing holds the cluster's terraform state: the next `up` completes the cluster.
    subprocess.run(_cli("local-cloud", "set", "provisioning-seconds", "0"), check=True, capture_output=True)
    again = subprocess.run(_cli("up", "--spec", str(spec), "--yes"), capture_output=True, text=True, env=env)
    assert again.returncode == 0, again.stderr[-3000:]


def test_the_shared_host_serves_each_engine_run_an_analyzer_of_its_own(
    isolated_home: Path, tmp_path: Path
) -> None:
    """The analyzer plugin the engine starts only relays the port of an analyzer the shared host runs for
    it: one per run, each with its own servicer (the engine configures each with its stack's tags and the
    policy config), stopped when the engine is done with its proxy. A pack the host does not serve runs
    in the proxy's own process, as before."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

    from npa_pulumi.engine.orchestrator import builtin_policy_pack

    pack = builtin_policy_pack()
    sock = tmp_path / "a.sock"
    log = tmp_path / "host.log"
    env = {**os.environ, "NPA_ANALYZER_SOCKET": str(sock), "NPA_SHARED_POLICY_PACKS": str(pack)}
    with log.open("wb") as err:
        host = subprocess.Popen(
            [sys.executable, "-u", "-m", "npa_pulumi.runtime.provider_host"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env=env,
        )
    proxies: list[subprocess.Popen[str]] = []
    try:
        assert host.stdout is not None and host.stdout.readline().strip().isdigit()
        wrapper = plugin_python_wrapper()
        ports = []
        for _ in range(2):
            proxy = subprocess.Popen(
                [wrapper, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
                cwd=pack,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            proxies.append(proxy)
            assert proxy.stdout is not None
            ports.append(int(proxy.stdout.readline()))
        assert ports[0] != ports[1]
        for proxy in proxies:  # the light relay (analyzer_relay), not an interpreter with the site packages
            argv = Path(f"/proc/{proxy.pid}/cmdline").read_bytes().split(b"\0")
            assert argv[1:3] == [b"-I", b"-S"], argv
        for port, stack in zip(ports, ("a", "b"), strict=True):
            with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = analyzer_pb2_grpc.AnalyzerStub(channel)
                info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
                assert info.name == "fleet-guardrails" and len(info.policies) > 3
                stub.ConfigureStack(
                    analyzer_pb2.AnalyzerStackConfigureRequest(stack=stack, tags={"npa:fleet": stack}),
                    timeout=30,
                )
        assert "analyzer for" in log.read_text()
        proxies[0].kill()  # the engine's run is over
        proxies[0].wait()
        deadline = time.monotonic() + 20
        while f"analyzer on port {ports[0]} stopped" not in log.read_text():
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert f"analyzer on port {ports[1]} stopped" not in log.read_text()
        # The pack the host does not serve: the proxy runs it itself (it would print its own port).
        other = subprocess.run(
            [
                wrapper,
                "-c",
                "import npa_pulumi.runtime.analyzer_relay as p, sys; "
                f"print(p.relay_analyzer({str(sock)!r}, ['127.0.0.1:1', '/elsewhere']))",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert other.stdout.strip() == "None", other.stderr
    finally:
        for proxy in proxies:
            proxy.kill()
            proxy.wait()
        assert host.stdin is not None
        host.stdin.close()
        host.wait(timeout=60)
    assert "stopped (stdin closed)" in log.read_text()


def test_a_policy_host_without_its_shared_host_runs_the_pack_itself(
    isolated_home: Path, tmp_path: Path
) -> None:
    """The light relay cannot reach the shared host (it stopped, or never started): it becomes the full
    plugin host, which serves the pack in its own process, as the engine's own policy host would."""
    from npa_pulumi.engine.orchestrator import builtin_policy_pack

    env = {**os.environ, "NPA_ANALYZER_SOCKET": str(tmp_path / "nobody-listens.sock")}
    host = subprocess.Popen(
        [plugin_python_wrapper(), "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=builtin_policy_pack(),
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert host.stdout is not None
        port = host.stdout.readline().strip()
        assert port.isdigit(), port  # the pack's own analyzer, serving
        argv = Path(f"/proc/{host.pid}/cmdline").read_bytes().split(b"\0")
        assert b"npa_pulumi.runtime.plugin_host" in argv and b"-S" not in argv, argv
    finally:
        host.kill()
        host.wait()
