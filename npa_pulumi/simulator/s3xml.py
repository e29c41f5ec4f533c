"""What the S3 server (s3wire.py) reads and writes besides bytes: S3's XML documents (parsed without
entities or a DOCTYPE, rendered escaped) and `Response`, what each route returns for the handler to send."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from typing import NamedTuple
from xml.sax.saxutils import escape

from npa_pulumi.simulator.s3errors import S3Error

S3_NS = "http://s3.amazonaws.com/doc/2006-03-01/"


class Response(NamedTuple):
    """A status, a body (none for a HEAD, whatever it holds) and headers beyond the ones every answer has."""

    status: int
    body: bytes = b""
    headers: dict[str, str] | None = None


def iso_time(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def xml_doc(root: str, inner: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?>\n<{root} xmlns="{S3_NS}">{inner}</{root}>'.encode()


def el(name: str, value: str | int) -> str:
    return f"<{name}>{escape(str(value))}</{name}>"


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]


def parse_xml(body: bytes) -> ET.Element:
    if b"<!DOCTYPE" in body or b"<!ENTITY" in body:
        raise S3Error("MalformedXML", "The XML you provided was not well-formed or did not validate")
    try:
        return ET.fromstring(body)
    except ET.ParseError:
        raise S3Error(
            "MalformedXML", "The XML you provided was not well-formed or did not validate"
        ) from None


def children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == name]


def text_of(element: ET.Element, name: str) -> str:
    found = children(element, name)
    return (found[0].text or "") if found else ""
