"""What the SeaweedFS server must hold for a local cloud (seaweed.py), read from its database: its live
buckets, and each live access key as an identity allowed exactly its account's object grants; keys deleted
or expired are written disabled with a secret nobody holds. (The server itself: the integration test
test_local_s3_seaweedfs.py.)"""

from __future__ import annotations

import json
import time
from pathlib import Path

from npa_pulumi.simulator import seaweed
from npa_pulumi.simulator.access_keys import access_key_secret
from npa_pulumi.simulator.simulator import LocalSimulator

OBJECT_ACTIONS = ("Read", "Write", "List", "Tagging", "ReadAcp", "PutBucketVersioning")


def test_identities_are_the_live_keys_with_exactly_their_grants(tmp_path: Path) -> None:
    sim = LocalSimulator(tmp_path / "cloud")
    project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
    state = sim.create_bucket(project, "team-state", "standard", 0)
    sim.create_bucket(project, "other-data", "standard", 0)
    gone = sim.create_bucket(project, "gone-data", "standard", 0)
    writer = sim.create_service_account(project, "writer")
    sim.grant_bucket_access(project, state["id"], writer["id"], "state-writers", "storage.editor")
    sim.grant_bucket_access(project, gone["id"], writer["id"], "gone-writers", "storage.editor")
    sim.delete_bucket(gone["id"])
    viewer = sim.create_service_account(project, "viewer")
    sim.grant_bucket_access(project, state["id"], viewer["id"], "state-viewers", "storage.viewer")
    live = sim.create_access_key(project, writer["id"])["key"]["aws_access_key_id"]
    viewing = sim.create_access_key(project, viewer["id"])["key"]["aws_access_key_id"]
    deleted = sim.create_access_key(project, writer["id"])["key"]
    sim.delete_access_key(deleted["id"])
    expired = sim.create_access_key(project, writer["id"], expires_at=time.time() + 60)["key"][
        "aws_access_key_id"
    ]

    want = seaweed.desired(tmp_path / "cloud")
    assert want.buckets == ("other-data", "team-state")
    assert dict(want.identities) == {
        live: tuple(f"{action}:team-state" for action in OBJECT_ACTIONS),
        viewing: (),  # a role that is not an object role allows nothing
        expired: tuple(f"{action}:team-state" for action in OBJECT_ACTIONS),
    }
    later = seaweed.desired(tmp_path / "cloud", now=time.time() + 120)
    assert expired not in dict(later.identities) and expired in later.retired
    assert later.digest() != want.digest()

    document = seaweed.identities_document(
        tmp_path / "cloud", later, "NPASYNC1", {deleted["aws_access_key_id"]}
    )
    by_key = {i["credentials"][0]["accessKey"]: i for i in document["identities"]}
    assert by_key[live]["credentials"][0]["secretKey"] == access_key_secret(tmp_path / "cloud", live)
    assert by_key[live]["name"] == live and "disabled" not in by_key[live]
    assert by_key[seaweed.ADMIN_KEY_ID]["actions"][0] == "Admin"
    assert by_key["NPASYNC1"]["actions"] == [f"List:{seaweed.CANARY_NAME}"]
    for retired in (deleted["aws_access_key_id"], expired):
        revoked = by_key[retired]
        assert revoked["disabled"] is True and revoked["actions"] == []
        assert revoked["credentials"][0]["status"] == "Inactive"
        assert revoked["credentials"][0]["secretKey"] != access_key_secret(tmp_path / "cloud", retired)
    assert len(json.dumps(document)) > 0


def test_without_a_running_server_nothing_is_synced(tmp_path: Path) -> None:
    """The storage service's hooks are no-ops while no SeaweedFS server serves the cloud: its daemon
    brings the server to the database when it starts."""
    sim = LocalSimulator(tmp_path / "cloud")
    project = sim.list_projects(sim.principal()["tenant_id"])[0]["id"]
    sim.create_bucket(project, "quiet-bucket", "standard", 0)
    assert not seaweed.serving(tmp_path / "cloud")
    assert seaweed.apply(tmp_path / "cloud") is False
    assert not (tmp_path / "cloud" / "s3" / "identities.json").exists()
