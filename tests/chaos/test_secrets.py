"""Secrets: after a full run of every fleet command, no IAM token, storage access-key secret, state
passphrase or capacity-block id appears in any command's stdout or stderr (text, JSON and markdown), in a
log file (engine logs, terraform.log), in a rendered tfvars file, or in plaintext in Pulumi state
(checkpoints, their backups and history). Terraform's own working state is private to the user.

The other chaos scenarios run the same scan after their crashes, faults and lock fights."""

from __future__ import annotations

from pathlib import Path

from chaos_helpers import TRANSCRIPT, FleetShape, assert_no_leaks, backend_root, npa, secret_values

BLOCK = "capacityblockgroup-local1"
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: vault
region: us-central1
defaults:
  cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
  enable_filestore: false
projects:
  - name: vault-alpha
    object_storage: {{enabled: true, storage_class: standard, size_gibibytes: 16}}
    clusters:
      - name: reserved
        gpu_nodes:
          {{count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
      - name: plain
        enable_filestore: true
        filestore_disk_size_gibibytes: 64
"""


def test_no_secret_leaks_after_a_full_lifecycle(chaos_home: Path, tmp_path: Path) -> None:
    spec = tmp_path / "fleet.yaml"
    spec.write_text(SPEC)
    shape = FleetShape.of(SPEC)
    common = ["--spec", str(spec)]
    for output in ("text", "json"):
        npa("plan", *common, "--output", output, check=True)
        npa("preflight", *common, "--output", output, check=True)
    npa("tfvars", *common, "--project", "vault-alpha", "--cluster", "reserved", check=True)
    npa("preview", *common, "--output", "markdown", check=True)
    npa("up", *common, "--yes", "-j", "2", check=True)
    npa("up", *common, "--yes", "-j", "2", "--refresh", "--output", "json", check=True)
    npa("preview", *common, "--output", "json", check=True)
    for output in ("text", "json"):
        npa("status", *common, "--output", output, check=True)
    npa("refresh", *common, check=True)
    npa("stacks", "--fleet", "vault", "--output", "json", check=True)

    secrets = secret_values(shape, [BLOCK])
    # Every kind of secret was really there to leak.
    assert {"passphrase", "iam token", "capacity block 0"} <= set(secrets)
    assert any(name.startswith("access-key secret") for name in secrets), secrets
    # The state does hold them, encrypted: the access-key secret is in a checkpoint only as ciphertext.
    checkpoint = (backend_root() / ".pulumi" / "stacks" / "npa-fleet" / "vault.vault-alpha.json").read_text()
    assert "storage_secret_access_key" in checkpoint and "ciphertext" in checkpoint

    opt_in = ("--delete-buckets", "--delete-storage-identity", "--delete-projects")
    npa("destroy", *common, *opt_in, "--dry-run", "--output", "json", check=True)
    npa("destroy", *common, *opt_in, "--yes", "-j", "2", "--output", "json", check=True)
    scanned = assert_no_leaks(chaos_home, secrets)
    assert scanned > len(TRANSCRIPT.runs) * 2  # files were scanned as well as every run's output

    # The receipts (ids of what was deleted: bucket, service account, access keys, project) hold no secret.
    receipts = sorted((chaos_home / ".npa-pulumi" / "teardown-receipts" / "vault").glob("*-destroy.json"))
    assert receipts, "the destroy left no receipt"
    assert any("access_key_ids" in path.read_text() for path in receipts)  # the ids are there
    for path in receipts:
        text = path.read_text()
        assert not [name for name, value in secrets.items() if value in text], path

    # After the destroy nothing under the npa home holds a capacity-block id: not Terraform's working state
    # or its backup, not a work dir, a kubeconfig or a teardown record. The simulated cloud keeps its data
    # in `local-cloud/` beside them: that is the cloud (which holds the block), not npa-pulumi's residue.
    home = chaos_home / ".npa-pulumi"
    holding = [
        str(path)
        for path in home.rglob("*")
        if path.is_file()
        and not path.is_symlink()
        and path.relative_to(home).parts[0] != "local-cloud"
        and BLOCK.encode() in path.read_bytes()
    ]
    assert not holding, f"capacity block {BLOCK} left in: {holding}"


def test_the_scan_finds_a_planted_secret(tmp_path: Path) -> None:
    """A control: the scan is not blind (a secret in a log, and one in a run's stderr)."""
    import pytest
    from chaos_helpers import CliResult, Transcript

    home = tmp_path / "home"
    (home / ".npa-pulumi" / "logs" / "f").mkdir(parents=True)
    (home / ".npa-pulumi" / "logs" / "f" / "f.p.up.log").write_text("... token=s3cr3t-value ...")
    with pytest.raises(AssertionError, match=r"token in .*f\.p\.up\.log"):
        assert_no_leaks(home, {"token": "s3cr3t-value"}, Transcript())
    (home / ".npa-pulumi" / "logs" / "f" / "f.p.up.log").write_text("clean")
    said = Transcript([CliResult(("up",), 1, "", "error: s3cr3t-value refused", 0.0)])
    with pytest.raises(AssertionError, match="token in run 0"):
        assert_no_leaks(home, {"token": "s3cr3t-value"}, said)
    assert assert_no_leaks(home, {"token": "s3cr3t-value"}, Transcript()) >= 1
