"""Measuring whole processes honestly: isolated homes, wall time, the CPU and peak memory of a process tree
(`/usr/bin/time -v` style, from `wait4`), the orchestrator's own peak RSS, medians over repeats, and the
facts of the machine the numbers came from (cores, load, versions)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "benchmarks" / "out"
# The default recipe's local mirror (bridge/recipe.py MIRROR_ENV): every deployment a scenario makes runs
# upstream k8s-training from it, as `make` sets it, rather than fetching the pinned commit from GitHub.
MIRROR_ENV = "NPA_K8S_TRAINING_MIRROR"
SHARED_MIRROR = REPO.parent / "shared" / "upstream" / "nebius-solutions-library"
CLI = [sys.executable, "-m", "npa_pulumi.cli.main"]
RSS_PROBE = [sys.executable, "-m", "benchmarks.rss_probe"]


@dataclass
class Sample:
    """One process run: wall seconds, CPU seconds of the whole tree, the largest RSS in the tree."""

    wall_s: float
    cpu_s: float
    tree_max_rss_mb: float
    code: int
    orchestrator_rss_mb: float | None = None
    failures: list[str] = field(default_factory=list)
    server_cpu_s: float | None = None  # the S3 server's CPU during the run (not in cpu_s: not the product's)

    def brief(self) -> dict[str, Any]:
        return {k: (round(v, 3) if isinstance(v, float) else v) for k, v in asdict(self).items()}


class RunFailed(RuntimeError):
    pass


@dataclass
class Home:
    """An isolated HOME with its own npa home, local cloud, Pulumi home and empty terraform CLI config."""

    root: Path
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def fresh(cls, root: Path) -> Home:
        shutil.rmtree(root, ignore_errors=True)
        (root / "home").mkdir(parents=True)
        (root / "terraformrc").write_text("")
        return cls(root)

    @property
    def npa_home(self) -> Path:
        return self.root / "home" / ".npa-pulumi"

    def env(self) -> dict[str, str]:
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("PULUMI_BACKEND_URL", "PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE")
            and not k.startswith("TF_")
        }
        home = self.root / "home"
        env.update(
            {
                "HOME": str(home),
                "NPA_PULUMI_HOME": str(self.npa_home),
                "NPA_LOCAL_CLOUD_DIR": str(self.npa_home / "local-cloud"),
                "PULUMI_HOME": str(home / ".pulumi"),
                "TF_CLI_CONFIG_FILE": str(self.root / "terraformrc"),
                "CHECKPOINT_DISABLE": "1",
                # The control-plane scenarios measure the fleet without clusters' API servers; the
                # `control_plane` scenario turns them on (Home.extra) and measures those.
                "NPA_LOCAL_CLOUD_KUBERNETES_API": "0",
                "PATH": f"{REPO / '.tools' / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            }
        )
        if not env.get(MIRROR_ENV) and (SHARED_MIRROR / "k8s-training" / "main.tf").is_file():
            env[MIRROR_ENV] = str(SHARED_MIRROR)
        env.update(self.extra)
        return env

    def npa(self, *args: str, check: bool = True, rss: bool = False, timeout: float = 3600) -> Sample:
        """Run the CLI as its own process. `rss` also records the orchestrator process's own peak RSS."""
        return self.npa_document(*args, check=check, rss=rss, timeout=timeout)[0]

    def npa_document(
        self, *args: str, check: bool = True, rss: bool = False, timeout: float = 3600
    ) -> tuple[Sample, dict[str, Any]]:
        """`npa` that also returns the JSON document the command printed (`{}` when it printed none)."""
        probe_file = self.root / f"rss-{time.monotonic_ns()}.txt"
        prefix = [*RSS_PROBE, str(probe_file), "--"] if rss else CLI
        sample, out, err = measure([*prefix, *args], self.env(), cwd=REPO, timeout=timeout)
        if rss and probe_file.exists():
            sample.orchestrator_rss_mb = int(probe_file.read_text().strip()) / 1024
        sample.failures = _failed_stacks(out)
        if check and sample.code != 0:
            detail = "\n".join(sample.failures) or out[-1500:]
            raise RunFailed(f"npa-pulumi {' '.join(args)} exited {sample.code}:\n{detail}\n{err[-2000:]}")
        try:
            document = json.loads(out)
        except ValueError:
            document = {}
        return sample, document if isinstance(document, dict) else {}

    def npa_json(self, *args: str) -> Any:
        proc = subprocess.run([*CLI, *args], env=self.env(), cwd=REPO, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RunFailed(f"npa-pulumi {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return json.loads(proc.stdout)


def _failed_stacks(stdout: str) -> list[str]:
    """`stack: status: error` of every stack that failed, from a `--output json` document."""
    try:
        document = json.loads(stdout)
    except ValueError:
        return []
    stacks = document.get("stacks", []) if isinstance(document, dict) else []
    return [
        f"{s.get('stack')}: {s.get('status')}: {str(s.get('error') or '')[:500]}"
        for s in stacks
        if isinstance(s, dict) and s.get("status") in ("failed", "destroy-incomplete")
    ]


def measure(
    argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 3600
) -> tuple[Sample, str, str]:
    """Run argv; wall time, and from wait4 the user+system CPU and the peak RSS of it and every
    descendant it waited for (the engine, providers, policy packs, terraform, provisioners)."""
    out_path = Path(os.environ.get("TMPDIR", "/tmp")) / f"npa-bench-{os.getpid()}-{time.monotonic_ns()}"
    with open(f"{out_path}.out", "w+") as out, open(f"{out_path}.err", "w+") as err:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=out, stderr=err, start_new_session=True)
        deadline = started + timeout
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                os.killpg(proc.pid, 9)
            time.sleep(0.02)
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    for suffix in (".out", ".err"):
        Path(f"{out_path}{suffix}").unlink(missing_ok=True)
    sample = Sample(
        wall_s=wall,
        cpu_s=usage.ru_utime + usage.ru_stime,
        tree_max_rss_mb=usage.ru_maxrss / 1024,
        code=proc.returncode,
    )
    return sample, stdout, stderr


def stats(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    ordered = sorted(values)
    return {
        "n": len(values),
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
    }


def median(values: list[float]) -> float:
    return float(statistics.median(values))


def load_average() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _version(argv: list[str]) -> str:
    # A CLI configuration file named but missing makes OpenTofu print a warning before its version.
    env = {k: v for k, v in os.environ.items() if k != "TF_CLI_CONFIG_FILE" or Path(v).is_file()}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    except (OSError, subprocess.TimeoutExpired):
        return "unavailable"
    return (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr) else "?"


def machine_facts() -> dict[str, Any]:
    from npa_pulumi import __version__
    from npa_pulumi.runtime.toolchain import find_pulumi, find_terraform

    meminfo = {}
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            key, _, value = line.partition(":")
            meminfo[key] = value.strip()
    except OSError:
        pass
    cpu_model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu_model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "hostname": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "cpu_model": cpu_model,
        "memory_total": meminfo.get("MemTotal", ""),
        "load_average_at_start": load_average(),
        "npa_pulumi": __version__,
        "pulumi": _version([str(find_pulumi()), "version"]),
        "terraform": _version([str(find_terraform()), "version"]),
        "git_commit": _version(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"]),
    }


MOTO_SERVER = Path(sys.executable).parent / "moto_server"


@dataclass
class S3Endpoint:
    """A real S3 server, SeaweedFS (`weed server -s3`, built by `make tools`), on free loopback ports, for
    the s3:// backend: one administrator's key, exported to the commands. Its own CPU is read apart from
    the commands' (`cpu_s`): the server is the cloud's, the commands are the product."""

    server: Any  # npa_pulumi.simulator.seaweedd.Standalone
    endpoint: str
    env: dict[str, str]

    @classmethod
    def start(cls, home: Path) -> S3Endpoint:
        import secrets

        from npa_pulumi.simulator.seaweedd import S3ServerError, Standalone

        admin = ("NPABENCHADMIN" + secrets.token_hex(4).upper(), secrets.token_urlsafe(30))
        try:
            server = Standalone.start(home, admin)
        except S3ServerError as err:
            raise RunFailed(str(err)) from None
        env = {"AWS_ACCESS_KEY_ID": admin[0], "AWS_SECRET_ACCESS_KEY": admin[1], "AWS_REGION": "us-east-1"}
        return cls(server, server.endpoint, env)

    def cpu_s(self) -> float:
        """The CPU seconds the server has used so far."""
        return float(self.server.cpu_s())

    def backend(self, home: Home, bucket: str) -> str:
        """A bucket made by `backend init` (as a user makes one) and the s3:// backend URL to use it."""
        made = home.npa_json(
            "backend",
            "init",
            "--cloud",
            "local",
            "--endpoint",
            self.endpoint,
            "--bucket",
            bucket,
            "--output",
            "json",
        )
        return str(made["backend_url"])

    def stop(self) -> None:
        self.server.stop()


@dataclass
class KeyService:
    """A key service (AWS KMS's API) for `--secrets-provider awskms://`: moto_server's (the dev extra), on
    a free loopback port; SeaweedFS serves S3 only."""

    process: subprocess.Popen[bytes]
    endpoint: str
    env: dict[str, str]

    @classmethod
    def start(cls, log: Path) -> KeyService:
        import secrets
        import socket

        if not MOTO_SERVER.exists():
            raise RunFailed(f"{MOTO_SERVER} is missing: install the dev extras (moto[server])")
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        env = {
            "AWS_ACCESS_KEY_ID": "AKIA" + secrets.token_hex(8).upper(),
            "AWS_SECRET_ACCESS_KEY": secrets.token_hex(20),
            "AWS_REGION": "us-east-1",
        }
        server = cls(process, f"http://127.0.0.1:{port}", env)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return server
            if process.poll() is not None:
                break
            time.sleep(0.1)
        server.stop()
        raise RunFailed(f"moto_server did not start: {log.read_text()[-1500:]}")

    def kms_provider(self) -> str:
        """A new key in the server's KMS, as the `--secrets-provider` URL the engine opens it with."""
        import boto3  # type: ignore[import-untyped]

        kms = boto3.client(
            "kms",
            endpoint_url=self.endpoint,
            region_name=self.env["AWS_REGION"],
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
        )
        key_id = kms.create_key(Description="npa-pulumi benchmark")["KeyMetadata"]["KeyId"]
        return f"awskms://{key_id}?region={self.env['AWS_REGION']}&endpoint={self.endpoint}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def measure_together(runs: list[list[str]], env: dict[str, str], cwd: Path, timeout: float = 3600) -> Sample:
    """Start every argv at once (N CI jobs on one machine) and wait for all: the wall time until the last
    finishes; CPU and RSS summed/maximised over them. Any failure raises RunFailed."""
    import concurrent.futures

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(runs)) as pool:
        results = list(pool.map(lambda argv: measure(argv, env, cwd, timeout), runs))
    wall = time.perf_counter() - started
    for (sample, out, err), argv in zip(results, runs, strict=True):
        if sample.code != 0:
            raise RunFailed(f"{' '.join(argv[-6:])} exited {sample.code}:\n{out[-1000:]}\n{err[-2000:]}")
    samples = [r[0] for r in results]
    return Sample(wall, sum(s.cpu_s for s in samples), max(s.tree_max_rss_mb for s in samples), 0)
