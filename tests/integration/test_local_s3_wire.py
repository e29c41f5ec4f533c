"""What the local cloud promises over S3, served by SeaweedFS (`weed server -s3`, seaweedd.py) and seen
by a generic S3 client (boto3): the cloud's buckets are the server's, its access keys are identities
allowed exactly their bucket grants, and the server refuses what the local IAM no longer allows (an
expired key, a deleted key, a key without the bucket's grant, a wrong secret); the operations the
engine's blob layer uses, versioning and multipart uploads work through a granted key.

One cloud and one server for the module (a server takes ~10 s to start); each test makes its own bucket,
service account and keys. How the server is started, found and stopped (and that no `weed` outlives its
owner) is test_local_cloud_processes.py's."""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.cloud.errors import PermissionDenied
from npa_pulumi.runtime.toolchain import find_weed
from npa_pulumi.simulator import seaweed, seaweedd
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class Cloud:
    sim: LocalSimulator
    directory: Path
    endpoint: str
    project: dict[str, Any]

    @property
    def region(self) -> str:
        return str(self.project["region"])

    def bucket_with_writer(self, name: str) -> tuple[dict[str, Any], dict[str, Any], Any]:
        """A bucket made by the storage service, a service account granted `storage.editor` on it, and
        an S3 client holding a key of that account; the bucket, the key as minted, the client."""
        bucket = self.sim.create_bucket(self.project["id"], name, "standard", 0)
        writer = self.sim.create_service_account(self.project["id"], f"{name}-writer")
        self.sim.grant_bucket_access(
            self.project["id"], bucket["id"], writer["id"], f"{name}-writers", "storage.editor"
        )
        minted = self.sim.create_access_key(self.project["id"], writer["id"])
        return bucket, minted, self.client(minted["key"]["aws_access_key_id"], minted["secret"])

    def client(self, key: str, secret: str) -> Any:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name=self.region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
        )


@pytest.fixture(scope="module")
def cloud(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cloud]:
    assert find_weed() is not None, "SeaweedFS's weed is built by `make tools`"
    directory = tmp_path_factory.mktemp("s3-wire") / "local-cloud"
    sim = LocalSimulator(directory)
    project = sim.list_projects(sim.principal()["tenant_id"])[0]
    endpoint = seaweedd.ensure_running(directory)
    try:
        assert seaweedd.ensure_running(directory) == endpoint  # one server, one port
        yield Cloud(sim, directory, endpoint, project)
    finally:
        seaweedd.stop(directory)


def _code(call: Any, **kwargs: Any) -> str:
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    with pytest.raises(ClientError) as err:
        call(**kwargs)
    return str(err.value.response["Error"]["Code"])


def _refused(call: Any, **kwargs: Any) -> str:
    """The error code once the server refuses the call (an expiry takes effect at the daemon's next sync,
    within a second)."""
    from botocore.exceptions import ClientError

    deadline = time.monotonic() + 20
    while True:
        try:
            call(**kwargs)
        except ClientError as err:
            return str(err.response["Error"]["Code"])
        assert time.monotonic() < deadline, "the server kept accepting the key"
        time.sleep(0.2)


def test_the_blob_layers_operations_through_a_granted_key(cloud: Cloud) -> None:
    bucket, _, s3 = cloud.bucket_with_writer("wire-blobs")
    for name, body in (("a/x.json", b"hello"), ("a/y/z", b"world!"), ("b", b"")):
        s3.put_object(Bucket="wire-blobs", Key=name, Body=body)
    assert s3.get_object(Bucket="wire-blobs", Key="a/x.json")["Body"].read() == b"hello"
    ranged = s3.get_object(Bucket="wire-blobs", Key="a/y/z", Range="bytes=1-3")
    assert (ranged["Body"].read(), ranged["ContentRange"]) == (b"orl", "bytes 1-3/6")
    top = s3.list_objects_v2(Bucket="wire-blobs", Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["b"] and top["CommonPrefixes"] == [{"Prefix": "a/"}]
    paginator = s3.get_paginator("list_objects_v2")
    pages = paginator.paginate(Bucket="wire-blobs", PaginationConfig={"PageSize": 1})
    assert [o["Key"] for p in pages for o in p.get("Contents", [])] == ["a/x.json", "a/y/z", "b"]
    assert s3.list_objects_v2(Bucket="wire-blobs", StartAfter="a/y/z")["Contents"][0]["Key"] == "b"
    assert s3.head_object(Bucket="wire-blobs", Key="a/x.json")["ETag"] == '"5d41402abc4b2a76b9719d911017c592"'

    s3.copy_object(Bucket="wire-blobs", Key="c", CopySource={"Bucket": "wire-blobs", "Key": "a/x.json"})
    assert s3.get_object(Bucket="wire-blobs", Key="c")["Body"].read() == b"hello"
    deleted = s3.delete_objects(Bucket="wire-blobs", Delete={"Objects": [{"Key": "c"}]})
    assert [d["Key"] for d in deleted["Deleted"]] == ["c"]
    assert _code(s3.get_object, Bucket="wire-blobs", Key="c") == "NoSuchKey"
    assert _code(s3.head_object, Bucket="wire-blobs", Key="missing") == "404"

    url = s3.generate_presigned_url("get_object", Params={"Bucket": "wire-blobs", "Key": "a/x.json"})
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.read() == b"hello"

    # a multipart upload, as the SDK's transfer manager sends one; an aborted one leaves nothing
    upload = s3.create_multipart_upload(Bucket="wire-blobs", Key="big")["UploadId"]
    first = s3.upload_part(Bucket="wire-blobs", Key="big", UploadId=upload, PartNumber=1, Body=b"x" * 5242880)
    last = s3.upload_part(Bucket="wire-blobs", Key="big", UploadId=upload, PartNumber=2, Body=b"yz")
    parts = [{"PartNumber": 1, "ETag": first["ETag"]}, {"PartNumber": 2, "ETag": last["ETag"]}]
    s3.complete_multipart_upload(
        Bucket="wire-blobs", Key="big", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert s3.get_object(Bucket="wire-blobs", Key="big")["Body"].read() == b"x" * 5242880 + b"yz"
    aborted = s3.create_multipart_upload(Bucket="wire-blobs", Key="gone")["UploadId"]
    s3.abort_multipart_upload(Bucket="wire-blobs", Key="gone", UploadId=aborted)
    assert "Uploads" not in s3.list_multipart_uploads(Bucket="wire-blobs")
    assert _code(s3.head_object, Bucket="wire-blobs", Key="gone") == "404"

    # what the storage service counts (the fleet's teardown refuses a non-empty bucket) is the server's
    assert cloud.sim.count_bucket_objects(bucket["id"]) == 4
    # a bucket deleted through the storage service goes from the server with its data
    cloud.sim.delete_bucket(bucket["id"])
    where = seaweed.endpoints(cloud.directory)
    assert where is not None
    assert "wire-blobs" not in seaweed.listed_buckets(seaweed.admin_client(cloud.directory, where))


def test_the_server_refuses_what_the_local_iam_does_not_allow(cloud: Cloud) -> None:
    bucket, minted, s3 = cloud.bucket_with_writer("wire-grants")
    key, secret = minted["key"]["aws_access_key_id"], minted["secret"]
    s3.put_object(Bucket="wire-grants", Key="k", Body=b"v")
    cloud.sim.probe_bucket(bucket["id"], minted["key"]["id"], key, secret)  # the server takes the key

    # a key without the bucket's grant: refused by the server, and by the storage service's probe
    outsider = cloud.sim.create_service_account(cloud.project["id"], "wire-outsider")
    other = cloud.sim.create_access_key(cloud.project["id"], outsider["id"])
    nobody = cloud.client(other["key"]["aws_access_key_id"], other["secret"])
    assert _code(nobody.get_object, Bucket="wire-grants", Key="k") == "AccessDenied"
    assert _code(nobody.put_object, Bucket="wire-grants", Key="c", Body=b"") == "AccessDenied"
    assert _code(nobody.list_objects_v2, Bucket="wire-grants") == "AccessDenied"
    with pytest.raises(PermissionDenied):
        cloud.sim.probe_bucket(
            bucket["id"], other["key"]["id"], other["key"]["aws_access_key_id"], other["secret"]
        )
    # the grant is the bucket's objects, nothing more: no bucket made or deleted over S3
    assert _code(s3.create_bucket, Bucket="wire-mine") == "AccessDenied"
    assert _code(s3.delete_bucket, Bucket="wire-grants") == "AccessDenied"
    # a wrong secret
    wrong = cloud.client(key, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert _code(wrong.list_objects_v2, Bucket="wire-grants") == "SignatureDoesNotMatch"

    # a temporary key (as `backend init` mints for the state bucket) works, then is refused once expired
    temporary = cloud.sim.create_access_key(
        cloud.project["id"], minted["key"]["service_account_id"], expires_at=time.time() + 3
    )
    short = cloud.client(temporary["key"]["aws_access_key_id"], temporary["secret"])
    assert short.get_object(Bucket="wire-grants", Key="k")["Body"].read() == b"v"
    assert _refused(short.get_object, Bucket="wire-grants", Key="k") in ("InvalidAccessKeyId", "AccessDenied")

    # a deleted key is refused at once (the delete returns after the server took it)
    cloud.sim.delete_access_key(minted["key"]["id"])
    assert _code(s3.get_object, Bucket="wire-grants", Key="k") in ("InvalidAccessKeyId", "AccessDenied")
    log = (seaweed.s3_dir(cloud.directory) / "weed.log").read_text()
    log += (seaweed.s3_dir(cloud.directory) / "server.log").read_text()
    assert secret not in log and other["secret"] not in log and temporary["secret"] not in log


def test_versioning_keeps_every_overwritten_and_deleted_version(cloud: Cloud) -> None:
    """Nebius Object Storage versions buckets, and so does the local cloud: overwrites and deletes keep the
    replaced version, which can be listed, read and deleted by id; deleting the latest delete marker brings
    the object back; every version counts as the bucket's data."""
    found, _, s3 = cloud.bucket_with_writer("wire-versions")
    bucket = "wire-versions"
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"

    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"v2")["VersionId"]
    assert v1 != v2
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"
    assert s3.get_object(Bucket=bucket, Key="k", VersionId=v1)["Body"].read() == b"v1"
    listed = s3.list_object_versions(Bucket=bucket)
    assert {(v["VersionId"], v["IsLatest"]) for v in listed["Versions"]} == {(v2, True), (v1, False)}

    # a delete leaves a marker; the object is gone, its versions are not; removing the marker restores it
    marker = s3.delete_object(Bucket=bucket, Key="k")
    assert marker["DeleteMarker"] is True
    assert _code(s3.get_object, Bucket=bucket, Key="k") == "NoSuchKey"
    [latest] = s3.list_object_versions(Bucket=bucket)["DeleteMarkers"]
    assert (latest["VersionId"], latest["IsLatest"]) == (marker["VersionId"], True)
    assert {v["VersionId"] for v in s3.list_object_versions(Bucket=bucket)["Versions"]} == {v1, v2}
    assert cloud.sim.count_bucket_objects(found["id"]) == 3  # two versions and the marker
    s3.delete_object(Bucket=bucket, Key="k", VersionId=marker["VersionId"])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"

    # deleting the current version by id makes the older one current
    s3.delete_object(Bucket=bucket, Key="k", VersionId=v2)
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v1"
    s3.delete_object(Bucket=bucket, Key="k", VersionId=v1)
    assert "Versions" not in s3.list_object_versions(Bucket=bucket)
    assert cloud.sim.count_bucket_objects(found["id"]) == 0
