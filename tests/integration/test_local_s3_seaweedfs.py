"""The local cloud's object storage on SeaweedFS (`weed server -s3`, seaweedd.py): the cloud's buckets are
SeaweedFS buckets, its access keys SeaweedFS identities allowed exactly their grants, and the server refuses
what the local IAM no longer allows (a deleted key, an expired one, a key without the bucket's grant, a
wrong secret); a generic S3 client (boto3) sees versioning and multipart uploads kept; the daemon is
started, found and stopped like the home-made server, and takes its `weed` with it however it dies."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.cloud.errors import PermissionDenied
from npa_pulumi.runtime.processes import process_alive
from npa_pulumi.runtime.toolchain import find_weed
from npa_pulumi.simulator import s3daemon, seaweed
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration


@pytest.fixture
def cloud(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LocalSimulator, Path]:
    assert find_weed() is not None, "SeaweedFS's weed is built by `make tools`"
    monkeypatch.setenv("NPA_LOCAL_CLOUD_SEAWEEDFS_S3", "1")
    cloud_dir = isolated_home / ".npa-pulumi" / "local-cloud"
    return LocalSimulator(cloud_dir), cloud_dir


def _client(endpoint: str, region: str, key: str, secret: str) -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
    )


def _code(call: Any, **kwargs: Any) -> str:
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    with pytest.raises(ClientError) as err:
        call(**kwargs)
    return str(err.value.response["Error"]["Code"])


def _refused(call: Any, **kwargs: Any) -> str:
    """The error code once the server refuses the call (an expiry takes effect at the daemon's next sync)."""
    from botocore.exceptions import ClientError

    deadline = time.monotonic() + 20
    while True:
        try:
            call(**kwargs)
        except ClientError as err:
            return str(err.response["Error"]["Code"])
        assert time.monotonic() < deadline, "the server kept accepting the key"
        time.sleep(0.2)


def _weed_pid(cloud_dir: Path) -> int:
    where = seaweed.endpoints(cloud_dir)
    assert where is not None
    return where.weed_pid


def test_the_clouds_buckets_and_keys_on_seaweedfs(cloud: tuple[LocalSimulator, Path]) -> None:
    sim, cloud_dir = cloud
    project = sim.list_projects(sim.principal()["tenant_id"])[0]
    region = project["region"]
    endpoint = s3daemon.ensure_running(cloud_dir)
    assert s3daemon.ensure_running(cloud_dir) == endpoint  # one server, one port
    assert s3daemon.status(cloud_dir).server == "seaweedfs"

    bucket = sim.create_bucket(project["id"], "sw-data", "standard", 0)
    writer = sim.create_service_account(project["id"], "writer")
    sim.grant_bucket_access(project["id"], bucket["id"], writer["id"], "sw-data-writers", "storage.editor")
    outsider = sim.create_service_account(project["id"], "outsider")
    minted = sim.create_access_key(project["id"], writer["id"])
    key, secret = minted["key"]["aws_access_key_id"], minted["secret"]
    other = sim.create_access_key(project["id"], outsider["id"])
    s3 = _client(endpoint, region, key, secret)

    # the bucket the storage service made is SeaweedFS's; the granted key uses it
    for name, body in (("a/x.json", b"hello"), ("a/y/z", b"world!"), ("b", b"")):
        s3.put_object(Bucket="sw-data", Key=name, Body=body)
    assert s3.get_object(Bucket="sw-data", Key="a/x.json")["Body"].read() == b"hello"
    ranged = s3.get_object(Bucket="sw-data", Key="a/y/z", Range="bytes=1-3")
    assert ranged["Body"].read() == b"orl"
    top = s3.list_objects_v2(Bucket="sw-data", Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["b"] and top["CommonPrefixes"] == [{"Prefix": "a/"}]
    assert sim.count_bucket_objects(bucket["id"]) == 3

    # versioning keeps what is overwritten and deleted
    s3.put_bucket_versioning(Bucket="sw-data", VersioningConfiguration={"Status": "Enabled"})
    v1 = s3.put_object(Bucket="sw-data", Key="state.json", Body=b"v1")["VersionId"]
    v2 = s3.put_object(Bucket="sw-data", Key="state.json", Body=b"v2")["VersionId"]
    assert v1 != v2
    assert s3.get_object(Bucket="sw-data", Key="state.json", VersionId=v1)["Body"].read() == b"v1"
    assert s3.delete_object(Bucket="sw-data", Key="state.json")["DeleteMarker"] is True
    assert _code(s3.get_object, Bucket="sw-data", Key="state.json") == "NoSuchKey"
    versions = s3.list_object_versions(Bucket="sw-data", Prefix="state.json")
    assert {v["VersionId"] for v in versions["Versions"]} == {v1, v2} and len(versions["DeleteMarkers"]) == 1

    # a multipart upload, as the SDK's transfer manager sends one
    upload = s3.create_multipart_upload(Bucket="sw-data", Key="big")["UploadId"]
    first = s3.upload_part(Bucket="sw-data", Key="big", UploadId=upload, PartNumber=1, Body=b"x" * 5242880)
    last = s3.upload_part(Bucket="sw-data", Key="big", UploadId=upload, PartNumber=2, Body=b"yz")
    parts = [{"PartNumber": 1, "ETag": first["ETag"]}, {"PartNumber": 2, "ETag": last["ETag"]}]
    s3.complete_multipart_upload(
        Bucket="sw-data", Key="big", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert s3.get_object(Bucket="sw-data", Key="big")["Body"].read() == b"x" * 5242880 + b"yz"

    # exactly the grants: no other bucket, no bucket made or deleted over S3, nothing for a key without one
    assert _code(s3.create_bucket, Bucket="sw-mine") == "AccessDenied"
    assert _code(s3.delete_bucket, Bucket="sw-data") == "AccessDenied"
    nobody = _client(endpoint, region, other["key"]["aws_access_key_id"], other["secret"])
    assert _code(nobody.get_object, Bucket="sw-data", Key="b") == "AccessDenied"
    assert _code(nobody.put_object, Bucket="sw-data", Key="c", Body=b"") == "AccessDenied"
    with pytest.raises(PermissionDenied):
        sim.probe_bucket(bucket["id"], other["key"]["id"], other["key"]["aws_access_key_id"], other["secret"])
    sim.probe_bucket(bucket["id"], minted["key"]["id"], key, secret)  # the granted key writes and reads
    wrong = _client(endpoint, region, key, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert _code(wrong.list_objects_v2, Bucket="sw-data") == "SignatureDoesNotMatch"

    # a temporary key is refused once expired; a deleted key at once
    temporary = sim.create_access_key(project["id"], writer["id"], expires_at=time.time() + 3)
    short = _client(endpoint, region, temporary["key"]["aws_access_key_id"], temporary["secret"])
    assert short.get_object(Bucket="sw-data", Key="a/x.json")["Body"].read() == b"hello"
    assert _refused(short.get_object, Bucket="sw-data", Key="a/x.json") in (
        "InvalidAccessKeyId",
        "AccessDenied",
    )
    sim.delete_access_key(minted["key"]["id"])
    assert _code(s3.get_object, Bucket="sw-data", Key="a/x.json") in ("InvalidAccessKeyId", "AccessDenied")

    # a bucket deleted through the storage service goes from SeaweedFS with its data
    sim.delete_bucket(bucket["id"])
    where = seaweed.endpoints(cloud_dir)
    assert where is not None
    assert "sw-data" not in seaweed.listed_buckets(seaweed.admin_client(cloud_dir, where))

    # stopped, no weed is left; started again, on the same port
    weed = _weed_pid(cloud_dir)
    assert s3daemon.stop(cloud_dir)
    assert not process_alive(weed)
    assert s3daemon.ensure_running(cloud_dir) == endpoint
    log = (s3daemon.s3_dir(cloud_dir) / "weed.log").read_text() + (
        s3daemon.s3_dir(cloud_dir) / "server.log"
    ).read_text()
    assert secret not in log and other["secret"] not in log


def test_a_killed_server_takes_its_weed_along_and_comes_back_with_the_data(
    cloud: tuple[LocalSimulator, Path],
) -> None:
    sim, cloud_dir = cloud
    project = sim.list_projects(sim.principal()["tenant_id"])[0]
    endpoint = s3daemon.ensure_running(cloud_dir)
    bucket = sim.create_bucket(project["id"], "sw-kept", "standard", 0)
    sim.put_object(bucket["id"], "kept.txt", "still here")
    daemon, weed = s3daemon.status(cloud_dir).pid, _weed_pid(cloud_dir)
    assert daemon is not None and process_alive(weed)

    os.kill(daemon, signal.SIGKILL)
    deadline = time.monotonic() + 20
    while process_alive(weed) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not process_alive(weed), "weed outlived its daemon"
    assert s3daemon.ensure_running(cloud_dir) == endpoint  # the same port: backend URLs stay valid
    assert sim.count_bucket_objects(bucket["id"]) == 1

    # a reset stops the server and its weed
    weed = _weed_pid(cloud_dir)
    sim.reset()
    assert not s3daemon.is_running(cloud_dir)
    assert not process_alive(weed)
