"""The local cloud's S3 endpoint as a generic S3 client (boto3) sees it: the operations the engine's
blob layer uses, S3's XML and errors, and objects that are the simulator's."""

from __future__ import annotations

import urllib.request
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.simulator import s3daemon
from npa_pulumi.simulator.simulator import LocalSimulator

pytestmark = pytest.mark.integration


def _client(endpoint: str, region: str, key: str, secret: str) -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=region,
        aws_access_key_id=key,
        aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}),
    )


def _code(call: Any, **kwargs: Any) -> str:
    from botocore.exceptions import ClientError  # type: ignore[import-untyped]

    with pytest.raises(ClientError) as err:
        call(**kwargs)
    return str(err.value.response["Error"]["Code"])


def test_s3_operations_on_the_simulators_buckets(isolated_home: Path) -> None:
    cloud_dir = isolated_home / ".npa-pulumi" / "local-cloud"
    sim = LocalSimulator(cloud_dir)
    project = sim.list_projects(sim.principal()["tenant_id"])[0]
    account = sim.create_service_account(project["id"], "wire")
    minted = sim.create_access_key(project["id"], account["id"])
    key, secret = minted["key"]["aws_access_key_id"], minted["secret"]
    endpoint = s3daemon.ensure_running(cloud_dir)
    assert s3daemon.ensure_running(cloud_dir) == endpoint  # one server, one port
    s3 = _client(endpoint, project["region"], key, secret)

    s3.create_bucket(Bucket="wire-test", CreateBucketConfiguration={"LocationConstraint": project["region"]})
    assert sim.find_bucket(project["id"], "wire-test") is not None  # a simulator bucket
    for name, body in (("a/x.json", b"hello"), ("a/y/z", b"world!"), ("b", b"")):
        s3.put_object(Bucket="wire-test", Key=name, Body=body)
    assert s3.get_object(Bucket="wire-test", Key="a/x.json")["Body"].read() == b"hello"
    ranged = s3.get_object(Bucket="wire-test", Key="a/y/z", Range="bytes=1-3")
    assert (ranged["Body"].read(), ranged["ContentRange"]) == (b"orl", "bytes 1-3/6")
    top = s3.list_objects_v2(Bucket="wire-test", Delimiter="/")
    assert [o["Key"] for o in top["Contents"]] == ["b"]
    assert top["CommonPrefixes"] == [{"Prefix": "a/"}]
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket="wire-test", PaginationConfig={"PageSize": 1})
    assert [o["Key"] for p in pages for o in p.get("Contents", [])] == ["a/x.json", "a/y/z", "b"]
    pages = s3.get_paginator("list_objects_v2").paginate(
        Bucket="wire-test", Delimiter="/", PaginationConfig={"PageSize": 1}
    )
    seen = [(p.get("CommonPrefixes"), [o["Key"] for o in p.get("Contents", [])]) for p in pages]
    assert seen == [([{"Prefix": "a/"}], []), (None, ["b"])]
    assert s3.list_objects_v2(Bucket="wire-test", StartAfter="a/y/z")["Contents"][0]["Key"] == "b"
    assert s3.head_object(Bucket="wire-test", Key="a/x.json")["ETag"] == '"5d41402abc4b2a76b9719d911017c592"'

    s3.copy_object(Bucket="wire-test", Key="c", CopySource={"Bucket": "wire-test", "Key": "a/x.json"})
    assert s3.get_object(Bucket="wire-test", Key="c")["Body"].read() == b"hello"
    deleted = s3.delete_objects(Bucket="wire-test", Delete={"Objects": [{"Key": "c"}, {"Key": "none"}]})
    assert sorted(d["Key"] for d in deleted["Deleted"]) == ["c", "none"]

    upload = s3.create_multipart_upload(Bucket="wire-test", Key="big")["UploadId"]
    first = s3.upload_part(Bucket="wire-test", Key="big", UploadId=upload, PartNumber=1, Body=b"x" * 5242880)
    last = s3.upload_part(Bucket="wire-test", Key="big", UploadId=upload, PartNumber=2, Body=b"yz")
    parts = [{"PartNumber": 1, "ETag": first["ETag"]}, {"PartNumber": 2, "ETag": last["ETag"]}]
    done = s3.complete_multipart_upload(
        Bucket="wire-test", Key="big", UploadId=upload, MultipartUpload={"Parts": parts}
    )
    assert done["ETag"].endswith('-2"')
    assert s3.get_object(Bucket="wire-test", Key="big")["Body"].read() == b"x" * 5242880 + b"yz"
    aborted = s3.create_multipart_upload(Bucket="wire-test", Key="gone")["UploadId"]
    s3.abort_multipart_upload(Bucket="wire-test", Key="gone", UploadId=aborted)
    assert _code(
        s3.upload_part, Bucket="wire-test", Key="gone", UploadId=aborted, PartNumber=1, Body=b""
    ) == ("NoSuchUpload")

    url = s3.generate_presigned_url("get_object", Params={"Bucket": "wire-test", "Key": "a/x.json"})
    with urllib.request.urlopen(url) as response:
        assert response.read() == b"hello"

    bucket = sim.find_bucket(project["id"], "wire-test")
    assert bucket is not None
    bucket_id = bucket["id"]
    assert sim.count_bucket_objects(bucket_id) == 4
    assert _code(s3.delete_bucket, Bucket="wire-test") == "BucketNotEmpty"
    assert _code(s3.get_object, Bucket="wire-test", Key="missing") == "NoSuchKey"
    assert _code(s3.head_object, Bucket="wire-test", Key="missing") == "404"
    assert _code(s3.list_objects_v2, Bucket="no-such-bucket") == "NoSuchBucket"
    assert _code(s3.get_bucket_tagging, Bucket="wire-test") == "NotImplemented"
    wrong = _client(endpoint, project["region"], key, secret[:-1] + ("A" if secret[-1] != "A" else "B"))
    assert _code(wrong.list_objects_v2, Bucket="wire-test") == "SignatureDoesNotMatch"
    sim.delete_access_key(minted["key"]["id"])
    assert _code(s3.list_objects_v2, Bucket="wire-test") == "InvalidAccessKeyId"

    s3daemon.stop(cloud_dir)
    assert not s3daemon.is_running(cloud_dir)
    assert s3daemon.ensure_running(cloud_dir) == endpoint  # the same port again


def test_versioning_keeps_every_overwritten_and_deleted_version(isolated_home: Path) -> None:
    """Nebius Object Storage versions buckets, and so does the local cloud: overwrites and deletes keep the
    replaced version, which can be listed, read, copied back and deleted by id; deleting the latest delete
    marker brings the object back; suspended versioning replaces only the null version."""
    cloud_dir = isolated_home / ".npa-pulumi" / "local-cloud"
    sim = LocalSimulator(cloud_dir)
    project = sim.list_projects(sim.principal()["tenant_id"])[0]
    account = sim.create_service_account(project["id"], "versions")
    minted = sim.create_access_key(project["id"], account["id"])
    s3 = _client(
        s3daemon.ensure_running(cloud_dir),
        project["region"],
        minted["key"]["aws_access_key_id"],
        minted["secret"],
    )
    bucket = "versioned-state"
    s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": project["region"]})
    assert "Status" not in s3.get_bucket_versioning(Bucket=bucket)
    before = s3.put_object(Bucket=bucket, Key="k", Body=b"v0")
    assert "VersionId" not in before  # written while versioning was off: the null version
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    assert s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled"

    v1 = s3.put_object(Bucket=bucket, Key="k", Body=b"v1")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="k", Body=b"v2")["VersionId"]
    assert len({v1, v2, "null"}) == 3
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"
    assert s3.get_object(Bucket=bucket, Key="k", VersionId=v1)["Body"].read() == b"v1"
    assert s3.get_object(Bucket=bucket, Key="k", VersionId="null")["Body"].read() == b"v0"
    listed = s3.list_object_versions(Bucket=bucket)
    assert [(v["VersionId"], v["IsLatest"]) for v in listed["Versions"]] == [
        (v2, True),
        (v1, False),
        ("null", False),
    ]

    # a delete leaves a marker; the object is gone, its versions are not; removing the marker restores it
    marker = s3.delete_object(Bucket=bucket, Key="k")
    assert marker["DeleteMarker"] is True
    assert _code(s3.get_object, Bucket=bucket, Key="k") == "NoSuchKey"
    [latest] = s3.list_object_versions(Bucket=bucket)["DeleteMarkers"]
    assert (latest["VersionId"], latest["IsLatest"]) == (marker["VersionId"], True)
    assert _code(s3.get_object, Bucket=bucket, Key="k", VersionId=marker["VersionId"]) == "MethodNotAllowed"
    s3.delete_object(Bucket=bucket, Key="k", VersionId=marker["VersionId"])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"

    # an overwritten version copied back becomes the current one (a new version, the others kept)
    restored = s3.copy_object(
        Bucket=bucket, Key="k", CopySource={"Bucket": bucket, "Key": "k", "VersionId": v1}
    )
    assert restored["CopySourceVersionId"] == v1
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v1"
    assert len(s3.list_object_versions(Bucket=bucket)["Versions"]) == 4
    # deleting the current version by id makes the next newer one current
    s3.delete_object(Bucket=bucket, Key="k", VersionId=restored["VersionId"])
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"v2"
    assert _code(s3.get_object, Bucket=bucket, Key="k", VersionId="no-such-version") == "NoSuchVersion"

    # suspended: writes replace the null version only
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"})
    s3.put_object(Bucket=bucket, Key="k", Body=b"s1")
    s3.put_object(Bucket=bucket, Key="k", Body=b"s2")
    ids = [v["VersionId"] for v in s3.list_object_versions(Bucket=bucket)["Versions"]]
    assert ids == ["null", v2, v1]
    assert s3.get_object(Bucket=bucket, Key="k")["Body"].read() == b"s2"

    # every version holds data: the bucket is not empty until all are deleted
    found = sim.find_bucket(project["id"], bucket)
    assert found is not None and sim.count_bucket_objects(found["id"]) == 3
    assert _code(s3.delete_bucket, Bucket=bucket) == "BucketNotEmpty"
    everything = [{"Key": "k", "VersionId": v} for v in ids]
    s3.delete_objects(Bucket=bucket, Delete={"Objects": everything})
    assert "Versions" not in s3.list_object_versions(Bucket=bucket)
    s3.delete_bucket(Bucket=bucket)
    assert sim.find_bucket(project["id"], bucket) is None
