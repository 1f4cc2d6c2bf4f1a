"""The one validation of a dataset's fields (the API's serializers and the admin's form wrap
it): its name, description and size, and its source for each kind. A refusal is a
DatasetInvalid naming each field; nothing here asks the cluster (services.py reads a named
PersistentVolume)."""

from __future__ import annotations

import posixpath
import re
import unicodedata
import urllib.parse
from collections.abc import Mapping
from typing import Any

from catalogue.fields import invisible_characters_refusal
from core.validation import FieldsInvalid

from .models import DATASET_NAME_MAX_LENGTH, Dataset

MAX_SIZE_GIB = 1_000_000
DATASET_NAME = re.compile(rf"[a-z0-9]([-a-z0-9]{{0,{DATASET_NAME_MAX_LENGTH - 2}}}[a-z0-9])?")
# a DNS subdomain: a PersistentVolume's name, a CSI driver's, a host name
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")
HOST = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9.]{0,251}[A-Za-z0-9])?|\[[0-9A-Fa-f:.]{2,45}\]")
BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
REGION = re.compile(r"[a-z0-9-]{1,32}")
MAX_PATH = 1024
MAX_ATTRIBUTES = 32
# the keys of `source` for each kind, as the API takes them
SOURCE_FIELDS: dict[str, tuple[str, ...]] = {
    Dataset.Kind.PV: ("persistent_volume",),
    Dataset.Kind.NFS: ("server", "path"),
    Dataset.Kind.CSI: ("driver", "volume_handle", "volume_attributes"),
    Dataset.Kind.S3: ("endpoint", "bucket", "prefix", "region"),
}
OPTIONAL = {"volume_attributes", "prefix", "region"}


class DatasetInvalid(FieldsInvalid):
    """A dataset write refused: `errors` maps each field to what is wrong with it."""


def dataset_name_clean(name: Any) -> str:
    if not isinstance(name, str) or not DATASET_NAME.fullmatch(name):
        raise DatasetInvalid({"name": [
            f"1 to {DATASET_NAME_MAX_LENGTH} lower-case letters, digits and '-', starting and "
            "ending with a letter or digit (it names the dataset in `gpuctl launch --dataset` "
            "and its default path, /datasets/NAME)."]})
    return name


def description_clean(description: Any) -> str:
    if description in (None, ""):
        return ""
    if not isinstance(description, str):
        raise DatasetInvalid({"description": ["A text, please."]})
    refusal = invisible_characters_refusal(description)
    clean = re.sub(r"\s+", " ", unicodedata.normalize("NFC", description)).strip()
    if refusal or len(clean) > 500:
        raise DatasetInvalid({"description": [refusal or "At most 500 characters."]})
    return clean


def size_clean(size_gib: Any) -> int:
    if isinstance(size_gib, bool) or not isinstance(size_gib, int) or \
            not 1 <= size_gib <= MAX_SIZE_GIB:
        raise DatasetInvalid({"size_gib": [
            f"Give a whole number of GiB from 1 to {MAX_SIZE_GIB}."]})
    return size_gib


def _text(value: Any, field: str, *, limit: int, required: bool = True) -> str:
    if value in (None, "") and not required:
        return ""
    if not isinstance(value, str) or not value or len(value) > limit or \
            not value.isprintable() or invisible_characters_refusal(value):
        raise DatasetInvalid({field: [f"Give {field} as at most {limit} printable characters."]})
    return value


def _absolute_path(value: Any, field: str) -> str:
    path = _text(value, field, limit=MAX_PATH)
    if not path.startswith("/") or ".." in path.split("/") or "\\" in path:
        raise DatasetInvalid({field: [f"{path!r} is not an absolute path without '..'."]})
    return posixpath.normpath(path)


def _nfs(data: Mapping[str, Any]) -> dict[str, Any]:
    server = _text(data.get("server"), "server", limit=253)
    if not HOST.fullmatch(server):
        raise DatasetInvalid({"server": [f"{server!r} is not a host name or address."]})
    return {"server": server, "path": _absolute_path(data.get("path"), "path")}


def _csi(data: Mapping[str, Any]) -> dict[str, Any]:
    driver = _text(data.get("driver"), "driver", limit=63)
    if not DNS_SUBDOMAIN.fullmatch(driver):
        raise DatasetInvalid({"driver": [f"{driver!r} is not a CSI driver's name."]})
    handle = _text(data.get("volume_handle"), "volume_handle", limit=MAX_PATH)
    attributes = data.get("volume_attributes") or {}
    if not isinstance(attributes, Mapping) or len(attributes) > MAX_ATTRIBUTES or not all(
            isinstance(key, str) and isinstance(value, str) and 0 < len(key) <= 253
            and key.isprintable() and len(value) <= MAX_PATH and value.isprintable()
            for key, value in attributes.items()):
        raise DatasetInvalid({"volume_attributes": [
            f"At most {MAX_ATTRIBUTES} attributes, each a name and a text value."]})
    return {"driver": driver, "volume_handle": handle,
            "volume_attributes": dict(sorted(attributes.items()))}


def _s3(data: Mapping[str, Any]) -> dict[str, Any]:
    endpoint = _text(data.get("endpoint"), "endpoint", limit=253)
    parts = urllib.parse.urlsplit(endpoint)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.username \
            or parts.password or parts.query or parts.fragment or parts.path not in ("", "/"):
        raise DatasetInvalid({"endpoint": [
            "The S3 service's address: http(s)://host[:port], nothing more."]})
    bucket = _text(data.get("bucket"), "bucket", limit=63)
    if not BUCKET.fullmatch(bucket) or ".." in bucket:
        raise DatasetInvalid({"bucket": [f"{bucket!r} is not an S3 bucket's name."]})
    prefix = _text(data.get("prefix"), "prefix", limit=MAX_PATH, required=False)
    if prefix.startswith("/") or ".." in prefix.split("/") or "\\" in prefix:
        raise DatasetInvalid({"prefix": ["A key prefix inside the bucket: no leading '/', "
                                         "no '..'."]})
    prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
    region = _text(data.get("region"), "region", limit=32, required=False)
    if region and not REGION.fullmatch(region):
        raise DatasetInvalid({"region": [f"{region!r} is not a region's name."]})
    return {"endpoint": endpoint.rstrip("/"), "bucket": bucket, "prefix": prefix,
            "region": region}


def _pv(data: Mapping[str, Any]) -> dict[str, Any]:
    name = _text(data.get("persistent_volume"), "persistent_volume", limit=253)
    if not DNS_SUBDOMAIN.fullmatch(name):
        raise DatasetInvalid({"persistent_volume": [
            f"{name!r} is not a PersistentVolume's name."]})
    return {"persistent_volume": name}


def dataset_source_clean(kind: Any, data: Mapping[str, Any]) -> dict[str, Any]:
    """The kind's source fields from `data` (the API's body or the form's), checked; a field
    of another kind is refused, rather than quietly left out."""
    if kind not in Dataset.Kind.values:
        raise DatasetInvalid({"kind": [f"One of: {', '.join(Dataset.Kind.values)}."]})
    others = {field for fields in SOURCE_FIELDS.values() for field in fields} \
        - set(SOURCE_FIELDS[kind])
    stray = sorted(field for field in others if data.get(field) not in (None, "", {}))
    if stray:
        raise DatasetInvalid({field: [f"Not a field of a {kind} dataset."] for field in stray})
    clean = {Dataset.Kind.PV: _pv, Dataset.Kind.NFS: _nfs, Dataset.Kind.CSI: _csi,
             Dataset.Kind.S3: _s3}[Dataset.Kind(kind)]
    return clean(data)
