"""What the fault campaign needs: the real CLI as a subprocess (every run kept for the secrets scan), the
local cloud's inventory, the state backend's locks, pending operations and decrypted checkpoints, and one
convergence check used after every fault."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "npa_pulumi.cli.main"]
PROJECT_NAME = "npa-fleet"


@dataclass
class CliResult:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    seconds: float

    def json(self) -> Any:
        return json.loads(self.stdout)

    def why(self) -> str:
        command = f"npa-pulumi {' '.join(self.args)}"
        return f"{command} exited {self.code}:\n{self.stderr[-4000:]}\n{self.stdout[-2000:]}"


@dataclass
class Transcript:
    """Every CLI run of the current test: what the secrets scan reads as stdout and stderr."""

    runs: list[CliResult] = field(default_factory=list)

    def texts(self) -> Iterable[tuple[str, str]]:
        for index, run in enumerate(self.runs):
            label = f"run {index} `npa-pulumi {' '.join(run.args)[:80]}`"
            yield f"{label} stdout", run.stdout
            yield f"{label} stderr", run.stderr


TRANSCRIPT = Transcript()


def npa(
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 900,
    check: bool = False,
    input_text: str | None = None,
    record: bool = True,
) -> CliResult:
    """`record=False` for the test's own oracle calls (the simulator's admin inventory lists capacity
    blocks by design): they are not output a user sees from a fleet command."""
    started = time.monotonic()
    proc = subprocess.run(
        [*CLI, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=timeout,
        input=input_text,
        cwd=REPO,
    )
    result = CliResult(tuple(args), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started)
    if record:
        TRANSCRIPT.runs.append(result)
    if check and proc.returncode != 0:
        raise AssertionError(result.why())
    return result


@dataclass
class Background:
    """A CLI run in its own process group, so a kill takes the engine, providers and terraform with it."""

    args: tuple[str, ...]
    proc: subprocess.Popen[str]
    stdout_path: Path
    stderr_path: Path
    started: float

    @classmethod
    def start(cls, directory: Path, *args: str, env: dict[str, str] | None = None) -> Background:
        directory.mkdir(parents=True, exist_ok=True)
        stamp = f"{time.monotonic_ns()}"
        out, err = directory / f"{stamp}.stdout", directory / f"{stamp}.stderr"
        with out.open("w") as stdout, err.open("w") as stderr:
            proc = subprocess.Popen(
                [*CLI, *args],
                cwd=REPO,
                stdout=stdout,
                stderr=stderr,
                text=True,
                start_new_session=True,
                env={**os.environ, **(env or {})},
            )
        return cls(tuple(args), proc, out, err, time.monotonic())

    def stderr(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def session_processes(self) -> dict[int, str]:
        """pid -> what it runs, for every live process of the run's session. The engine starts its plugins
        (dynamic providers, policy analyzers) in process groups of their own, but in the same session."""
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                pid = int(entry.name)
                if os.getsid(pid) != self.proc.pid:
                    continue
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except (ProcessLookupError, PermissionError, FileNotFoundError, OSError):
                continue
            if argv and argv[0]:
                found[pid] = _describe(argv)
        return found

    def kill(self, whole_session: bool = True) -> list[str]:
        """SIGKILL the CLI's process group, as CI cancelling a job does; with `whole_session` also every
        other process of its session (the engine's plugin hosts live in process groups of their own), as a
        crashed machine loses them all at once. Returns what was running."""
        running = self.session_processes()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        if whole_session:
            self.kill_leftovers()
        self._record()
        return sorted(set(running.values()))

    def kill_leftovers(self) -> None:
        for _ in range(50):  # a plugin may have started between a listing and the kill
            late = self.session_processes()
            if not late:
                break
            for pid in late:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)

    def wait_for_orphans_to_stop(self, timeout: float) -> list[str]:
        """After a process-group kill: the engine's plugin hosts (dynamic providers, policy analyzers) and
        their terraform must stop by themselves. Returns those still alive after `timeout` seconds."""
        plugins = (
            "python -m pulumi.dynamic",
            "python -m pulumi.policy",
            "python -m npa_pulumi.runtime.plugin_guard",  # in front of the Go Kubernetes provider
            "python -m npa_pulumi.runtime.provider_host",  # the command's shared dynamic-provider host
            "terraform",
            "pulumi-",
        )
        deadline = time.monotonic() + timeout
        while True:
            alive = [n for n in self.session_processes().values() if n.startswith(plugins)]
            if not alive or time.monotonic() > deadline:
                return sorted(alive)
            time.sleep(0.2)

    def wait(self, timeout: float = 900) -> int:
        code = self.proc.wait(timeout=timeout)
        self._record()
        return code

    def _record(self) -> None:
        TRANSCRIPT.runs.append(
            CliResult(
                self.args,
                self.proc.returncode,
                self.stdout_path.read_text(errors="replace"),
                self.stderr(),
                time.monotonic() - self.started,
            )
        )


def _describe(argv: list[bytes]) -> str:
    parts = [a.decode(errors="replace") for a in argv if a]
    if not parts:
        return ""
    exe = Path(parts[0]).name
    if exe.startswith("python") and len(parts) > 2 and parts[1] in ("-m", "-u"):
        module = parts[2] if parts[1] == "-m" else (parts[3] if len(parts) > 3 else "")
        if module == "npa_pulumi.simulator.api" and len(parts) > 3:
            return f"local-cloud api {parts[3]}"
        return f"python -m {module}"
    if exe == "pulumi" and len(parts) > 2:
        return f"pulumi {parts[2]}"
    if exe in ("terraform", "tofu") and len(parts) > 1:
        return f"terraform {parts[1]}"
    if exe in ("sh", "bash", "dash") and len(parts) > 1:
        return "sh -c" if parts[1] == "-c" else Path(parts[1]).name  # a plugin launcher script
    return exe


# ------------------------------------------------------------------------------------------- cloud


def inventory() -> dict[str, Any]:
    shown: dict[str, Any] = npa("local-cloud", "show", "--output", "json", check=True, record=False).json()
    return shown


def named(records: list[dict[str, Any]], **match: Any) -> list[str]:
    return sorted(r["name"] for r in records if all(r.get(k) == v for k, v in match.items()))


# ------------------------------------------------------------------------------------------- backend


def npa_home() -> Path:
    return Path(os.environ["NPA_PULUMI_HOME"])


def backend_root() -> Path:
    return npa_home() / "state"


def stack_files() -> list[Path]:
    stacks = backend_root() / ".pulumi" / "stacks" / PROJECT_NAME
    return sorted(stacks.glob("*.json")) if stacks.is_dir() else []


def stack_names() -> list[str]:
    return [p.name.removesuffix(".json") for p in stack_files()]


def lock_files() -> list[Path]:
    locks = backend_root() / ".pulumi" / "locks"
    return sorted(locks.rglob("*.json")) if locks.is_dir() else []


def pending_operations() -> dict[str, list[str]]:
    """Stack -> URNs of its pending operations, straight from the checkpoints."""
    found: dict[str, list[str]] = {}
    for path in stack_files():
        latest = (json.loads(path.read_text()).get("checkpoint") or {}).get("latest") or {}
        pending = latest.get("pending_operations") or []
        if pending:
            urns = [op.get("resource", {}).get("urn", "?") for op in pending]
            found[path.name.removesuffix(".json")] = urns
    return found


def pulumi(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The pinned engine against the test's backend and passphrase (what a user would run)."""
    from npa_pulumi.runtime.toolchain import find_pulumi

    workspace = npa_home() / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    if not (workspace / "Pulumi.yaml").exists():
        (workspace / "Pulumi.yaml").write_text(f"name: {PROJECT_NAME}\nruntime: python\n")
    env = {
        **os.environ,
        "PULUMI_BACKEND_URL": f"file://{backend_root()}",
        "PULUMI_CONFIG_PASSPHRASE_FILE": str(npa_home() / "passphrase"),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
    }
    proc = subprocess.run(
        [str(find_pulumi()), "--non-interactive", *args],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"pulumi {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc


def decrypted_resources(stack: str) -> list[dict[str, Any]]:
    exported = json.loads(pulumi("stack", "export", "--show-secrets", "--stack", stack).stdout)
    return list((exported.get("deployment") or {}).get("resources") or [])


def terraform_state_of(stack: str) -> dict[str, Any] | None:
    """The Terraform state a cluster stack keeps in Pulumi state (decrypted), or None."""
    for resource in decrypted_resources(stack):
        if resource.get("type", "").endswith(":TerraformModule"):
            state = (resource.get("outputs") or {}).get("tf_state")
            if isinstance(state, dict) and "plaintext" in state:  # a secret, as `--show-secrets` shows it
                state = json.loads(state["plaintext"])
            if isinstance(state, str):
                return dict(json.loads(state)) if state.strip() else None
            return dict(state) if state else None
    return None


def tf_resource_addresses(state: dict[str, Any]) -> list[str]:
    found = []
    for resource in state.get("resources") or []:
        for instance in resource.get("instances") or []:
            index = instance.get("index_key")
            suffix = "" if index is None else f"[{index}]"
            found.append(f"{resource.get('type')}.{resource.get('name')}{suffix}")
    return sorted(found)


# ------------------------------------------------------------------------------------------- the fleet


@dataclass(frozen=True)
class ClusterShape:
    project_key: str
    name: str
    gpu_groups: int = 0
    filesystem: bool = False
    gpu_cluster: bool = False


@dataclass(frozen=True)
class FleetShape:
    """What a spec asks for, in terms the inventory can be checked against."""

    fleet: str
    projects: dict[str, str]  # key -> the project's id, or "name:<display name>" for one created by name
    clusters: tuple[ClusterShape, ...]

    @classmethod
    def of(cls, spec_text: str) -> FleetShape:
        """Derived with the product's own planner and tfvars renderer (so the check follows the recipe)."""
        from npa_pulumi.plan import render_tfvars, resolve_targets
        from npa_pulumi.spec import parse_spec

        spec = parse_spec(spec_text)
        projects: dict[str, str] = {}
        clusters = []
        for target in resolve_targets(spec):
            projects[target.project_key] = target.project_id or f"name:{target.display_name}"
            tfvars = render_tfvars(target).file_vars
            fabric = str(tfvars.get("infiniband_fabric") or "").strip()
            gpu_cluster = tfvars.get("enable_gpu_cluster")
            clusters.append(
                ClusterShape(
                    target.project_key,
                    target.cluster_name,
                    gpu_groups=int(tfvars.get("gpu_node_groups") or 0),
                    filesystem=bool(tfvars.get("enable_filestore")) and not tfvars.get("existing_filestore"),
                    gpu_cluster=bool(gpu_cluster) if gpu_cluster is not None else bool(fabric),
                )
            )
        return cls(spec.name, projects, tuple(clusters))

    def cluster_stacks(self) -> list[str]:
        return sorted(f"{self.fleet}.{c.project_key}.{c.name}" for c in self.clusters)

    def project_stacks(self) -> list[str]:
        return sorted(f"{self.fleet}.{key}" for key in self.projects)


def project_ids(cloud: dict[str, Any], shape: FleetShape) -> dict[str, str]:
    ids = {}
    for key, how in shape.projects.items():
        if not how.startswith("name:"):
            ids[key] = how
        else:
            matches = [p["id"] for p in cloud["projects"] if p["name"] == how.removeprefix("name:")]
            assert len(matches) == 1, f"project {how}: expected exactly one, found {matches}"
            ids[key] = matches[0]
    return ids


def assert_converged(shape: FleetShape, context: str = "") -> dict[str, Any]:
    """The cloud holds exactly what the spec asks for (nothing orphaned, nothing missing), every stack
    exists without locks or pending operations, and each cluster stack's Terraform state (kept in Pulumi
    state) records exactly the objects the cloud has."""
    cloud = inventory()
    where = f" ({context})" if context else ""
    ids = project_ids(cloud, shape)
    for key, project_id in ids.items():
        mine = [c for c in shape.clusters if c.project_key == key]
        expected = sorted(c.name for c in mine)
        assert named(cloud["mk8s_clusters"], project_id=project_id) == expected, f"clusters of {key}{where}"
        clusters = {c["name"]: c for c in cloud["mk8s_clusters"] if c["project_id"] == project_id}
        for shape_cluster in mine:
            cluster = clusters[shape_cluster.name]
            groups = named(cloud["node_groups"], cluster_id=cluster["id"])
            want = [f"{shape_cluster.name}-ng-cpu"] + [
                f"{shape_cluster.name}-ng-gpu-{i}" for i in range(shape_cluster.gpu_groups)
            ]
            assert groups == sorted(want), f"node groups of {shape_cluster.name}{where}"
        # upstream names a filesystem `filesystem-tf-<its random suffix>`: counted, not named
        filesystems = named(cloud["filesystems"], project_id=project_id)
        assert len(filesystems) == sum(1 for c in mine if c.filesystem), f"filesystems of {key}{where}"
        gpu_clusters = [g for g in cloud["gpu_clusters"] if g["project_id"] == project_id]
        assert len(gpu_clusters) == sum(1 for c in mine if c.gpu_cluster), f"GPU clusters of {key}{where}"
        if shape.projects[key].startswith("name:"):
            owned = [s for s in cloud["subnets"] if s["project_id"] == project_id]
            assert len(owned) == 1, f"subnets of created project {key}{where}: {owned}"
            assert len([n for n in cloud["networks"] if n["project_id"] == project_id]) == 1
    node_groups_of_fleet = {c["id"] for c in cloud["mk8s_clusters"]}
    stray = [g["name"] for g in cloud["node_groups"] if g["cluster_id"] not in node_groups_of_fleet]
    assert not stray, f"node groups without a cluster{where}: {stray}"

    stacks = set(stack_names())
    assert set(shape.project_stacks()) | set(shape.cluster_stacks()) <= stacks, f"stacks{where}: {stacks}"
    assert lock_files() == [], f"locks left{where}: {lock_files()}"
    assert pending_operations() == {}, f"pending operations left{where}: {pending_operations()}"
    for shape_cluster in shape.clusters:
        stack = f"{shape.fleet}.{shape_cluster.project_key}.{shape_cluster.name}"
        state = terraform_state_of(stack)
        assert state is not None, f"{stack} keeps no Terraform state{where}"
        # The cloud objects upstream k8s-training's root module keeps (its modules' releases aside).
        addresses = [
            a for a in tf_resource_addresses(state) if a.startswith(("nebius_mk8s_", "nebius_compute_"))
        ]
        want = ["nebius_mk8s_v1_cluster.k8s-cluster", "nebius_mk8s_v1_node_group.cpu-only"]
        want += [f"nebius_mk8s_v1_node_group.gpu[{i}]" for i in range(shape_cluster.gpu_groups)]
        want += ["nebius_compute_v1_filesystem.shared-filesystem[0]"] if shape_cluster.filesystem else []
        want += ["nebius_compute_v1_gpu_cluster.fabric_2[0]"] if shape_cluster.gpu_cluster else []
        assert addresses == sorted(want), f"Terraform state of {stack}{where}: {addresses}"
        kube_cluster = (state.get("outputs") or {}).get("kube_cluster", {}).get("value") or {}
        cluster_id = kube_cluster.get("id")
        project_id = ids[shape_cluster.project_key]
        live = [c["id"] for c in cloud["mk8s_clusters"] if c["project_id"] == project_id]
        assert cluster_id in live, f"{stack}: state names {cluster_id}, the cloud has {live}{where}"
        work_state = npa_home() / "work" / stack / "k8s-training" / "terraform.tfstate"
        if work_state.is_file() and work_state.read_text().strip():
            local = json.loads(work_state.read_text())
            assert local.get("lineage") == state.get("lineage"), f"{stack}: lineage differs{where}"
            assert int(local.get("serial", 0)) <= int(state.get("serial", 0)), (
                f"{stack}: the work dir holds newer Terraform state than Pulumi{where}"
            )
    return cloud


# ------------------------------------------------------------------------------------------- secrets


def secret_values(shape: FleetShape | None = None, capacity_blocks: Iterable[str] = ()) -> dict[str, str]:
    """The secrets of a run in the current HOME: the passphrase, the IAM token the bridge mints, each
    project stack's storage access-key secret, and the capacity-block ids the spec reserves."""
    from npa_pulumi.simulator import LocalCloud

    found = {"passphrase": (npa_home() / "passphrase").read_text().strip()}
    found["iam token"] = LocalCloud().access_token().get_secret_value()
    for stack in shape.project_stacks() if shape else []:
        if stack not in stack_names():
            continue
        proc = pulumi("stack", "output", "--json", "--show-secrets", "--stack", stack)
        secret = json.loads(proc.stdout or "{}").get("storage_secret_access_key")
        if secret:
            found[f"access-key secret of {stack}"] = secret
    for index, block in enumerate(capacity_blocks):
        found[f"capacity block {index}"] = block
    return {k: v for k, v in found.items() if v}


# Files that are meant to hold a secret, or are not npa-pulumi's output: the passphrase file itself, the
# simulated cloud's database, Terraform's own working state and provider caches.
_NOT_SCANNED_NAMES = {"passphrase", "cloud.db", "cloud.db-wal", "cloud.db-shm", "init.lock"}


def scanned_files(home: Path) -> list[Path]:
    files = []
    for path in home.rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        parts = set(path.relative_to(home).parts)
        if path.name in _NOT_SCANNED_NAMES or parts & {".terraform", "tf-plugins", "plugins", "recipes"}:
            continue
        if path.name.startswith("terraform.tfstate"):
            continue  # Terraform's working state: checked for privacy instead (see assert_no_leaks)
        files.append(path)
    return files


def assert_no_leaks(home: Path, secrets: dict[str, str], transcript: Transcript = TRANSCRIPT) -> int:
    """No secret appears in any CLI run's stdout/stderr or in any file npa-pulumi wrote under `home`
    (logs, terraform.log, tfvars, Pulumi checkpoints, backups, history); Terraform's working state files
    are private to the user. Returns how many texts were scanned."""
    assert secrets, "nothing to look for"
    leaks = []
    scanned = 0
    for label, text in transcript.texts():
        scanned += 1
        leaks += [f"{name} in {label}" for name, value in secrets.items() if value in text]
    for path in scanned_files(home):
        if path.stat().st_size > 20 * 2**20:
            continue
        scanned += 1
        data = path.read_bytes()
        leaks += [f"{name} in {path}" for name, value in secrets.items() if value.encode() in data]
    for state in home.rglob("terraform.tfstate*"):
        mode = state.stat().st_mode & 0o777
        parent_mode = state.parent.parent.stat().st_mode & 0o777
        if mode & 0o077 and parent_mode & 0o077:
            leaks.append(f"{state} is readable by others ({oct(mode)}, its work dir {oct(parent_mode)})")
    assert not leaks, "secrets leaked:\n  " + "\n  ".join(sorted(set(leaks)))
    return scanned


def copy_tree_for_debugging(source: Path, dest: Path) -> None:
    shutil.copytree(source, dest, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".terraform", "plugins"))
