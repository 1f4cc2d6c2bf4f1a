"""The one validation of a secret's name and data, and of a launch's use of secrets.

A refusal names the field, the variable, the file or the entry it is about, and never quotes a
value: what is refused here may be a password, and a message goes back in an API answer, onto a
page and perhaps into a log.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings

from catalogue.environment import ENV_NAME, MAX_ENV_NAME, env_problems
from catalogue.images import image_allowed
from core.validation import CONTAINER_SYSTEM_PATHS, FieldsInvalid, path_overlaps
from tenants.models import Tenant

from .manifests import (
    ENV,
    FILE,
    KINDS,
    REGISTRY,
    REGISTRY_FIELDS,
    S3,
    S3_FIELDS,
    S3_REQUIRED,
    SecretUse,
    default_path,
)
from .models import Secret

if TYPE_CHECKING:
    from identity.identity import Identity

NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
MAX_NAME = 63
MAX_ENV_ITEMS = 100
MAX_FILES = 20
FILE_NAME = re.compile(r"[-._a-zA-Z0-9]+")  # what the API server accepts as a Secret's key
MAX_FILE_NAME = 253
# a Secret is at most 1 MiB in etcd, base64 takes a third more: the files stay well below
MAX_FILES_BYTES = 512 * 1024
MAX_FIELD = 4096  # a registry's or S3 server's field: a password, a token, a URL
SERVER = re.compile(r"[a-zA-Z0-9]([-a-zA-Z0-9.]*[a-zA-Z0-9])?(:[0-9]{1,5})?")
BUCKET = re.compile(r"[a-z0-9][-a-z0-9.]{1,61}[a-z0-9]")
REGION = re.compile(r"[a-z0-9][-a-z0-9]{0,31}")
MAX_SECRETS_PER_LAUNCH = 16
MAX_PATH = 200
PATH = re.compile(r"/[-._a-zA-Z0-9/]*")


class SecretInvalid(FieldsInvalid):
    """A secret's name or data refused; `errors` by field."""


def name_problems(name: str) -> list[str]:
    if len(name) > MAX_NAME or not NAME.fullmatch(name):
        return [f"A secret's name is at most {MAX_NAME} lower-case letters, digits and "
                "hyphens, starting and ending with a letter or digit (e.g. hf-token)."]
    return []


def _control(value: str) -> bool:
    return any(ord(ch) < 32 or ord(ch) == 127 for ch in value)


def _strings(data: Any) -> list[str]:
    if not isinstance(data, dict) or not data:
        return ["Give the data as an object of names and values."]
    return [f"The value of {_entry(index).lower()} is not text."
            for index, (key, value) in enumerate(data.items(), start=1)
            if not isinstance(key, str) or not isinstance(value, str)]


def _entry(index: int) -> str:
    """How a refusal names a key it refuses: by its place in the data, never by what it holds
    (a line pasted whole, `HF_TOKEN=hf_…`, puts a value where a name goes)."""
    return f"Entry {index} of the data"


def _env_problems(data: dict[str, str]) -> list[str]:
    if len(data) > MAX_ENV_ITEMS:
        return [f"At most {MAX_ENV_ITEMS} variables."]
    names = [f"{_entry(index)} is not a variable's name (at most {MAX_ENV_NAME} letters, digits, "
             "'_', '-' and '.', not starting with a digit): give the name alone, its value apart."
             for index, key in enumerate(data, start=1)
             if len(key) > MAX_ENV_NAME or not ENV_NAME.fullmatch(key)]
    if names:  # env_problems would quote them
        return names
    problems = env_problems(data)  # names, sizes, the GPU stack's (catalogue/environment.py)
    problems += [f"The value of {key} holds a NUL character." for key, value in data.items()
                 if "\x00" in value]
    return problems


def _file_problems(data: dict[str, str]) -> list[str]:
    if len(data) > MAX_FILES:
        return [f"At most {MAX_FILES} files."]
    problems = [f"{_entry(index)} is not a file name: letters, digits, '-', '_' and '.', "
                f"at most {MAX_FILE_NAME} characters." for index, name in enumerate(data, start=1)
                if len(name) > MAX_FILE_NAME or not FILE_NAME.fullmatch(name)
                or name in (".", "..") or name.startswith("..")]
    size = sum(len(content.encode()) for content in data.values())
    if size > MAX_FILES_BYTES:
        problems.append(f"The files take {size // 1024} KiB together; at most "
                        f"{MAX_FILES_BYTES // 1024} KiB.")
    return problems


def _fields_problems(data: dict[str, str], fields: Iterable[str],
                     required: Iterable[str]) -> list[str]:
    fields = tuple(fields)
    problems = [f"{_entry(index)} is not one of {', '.join(fields)}."
                for index, key in enumerate(data, start=1) if key not in fields]
    problems += [f"{field} is required." for field in required if not data.get(field)]
    problems += [f"{field} is longer than {MAX_FIELD} characters." for field in fields
                 if len(data.get(field) or "") > MAX_FIELD]
    problems += [f"{field} holds a line break or another control character." for field in fields
                 if _control(data.get(field) or "")]
    return problems


def registry_server_refusal(server: str) -> str | None:
    """Why a registry may not be logged in to: not a host name, or outside the site's
    registries (PORTAL_IMAGE_REGISTRIES), from which no image could be launched anyway."""
    if not SERVER.fullmatch(server) or "." not in server and ":" not in server \
            and server != "localhost":
        return "server is a registry's host name (and port), e.g. registry.example.org."
    site = settings.PORTAL_IMAGE_REGISTRIES
    if site and not image_allowed(f"{server}/x", [entry.split("/")[0] for entry in site]):
        return f"Images must come from the site's registries: {', '.join(site)}."
    return None


def _registry_problems(data: dict[str, str]) -> list[str]:
    problems = _fields_problems(data, REGISTRY_FIELDS, REGISTRY_FIELDS)
    if not problems and (refusal := registry_server_refusal(data["server"])):
        problems.append(refusal)
    return problems


def _s3_problems(data: dict[str, str]) -> list[str]:
    problems = _fields_problems(data, S3_FIELDS, S3_REQUIRED)
    if problems:
        return problems
    endpoint = urlsplit(data["endpoint"])
    if endpoint.scheme not in ("http", "https") or not endpoint.hostname or endpoint.username \
            or endpoint.password:
        problems.append("endpoint is the S3 server's URL, e.g. https://s3.example.org.")
    if not BUCKET.fullmatch(data["bucket"]):
        problems.append("bucket is 3 to 63 lower-case letters, digits, '-' and '.'.")
    if data.get("region") and not REGION.fullmatch(data["region"]):
        problems.append("region is lower-case letters, digits and '-', e.g. us-east-1.")
    if any(ch.isspace() for field in ("access_key", "secret_key") for ch in data[field]):
        problems.append("The keys hold no spaces.")
    return problems


DATA_RULES = {ENV: _env_problems, FILE: _file_problems, REGISTRY: _registry_problems,
              S3: _s3_problems}


def data_problems(kind: str, data: Any) -> list[str]:
    """Why `data` cannot be a secret of `kind`, or []. Never quotes a value."""
    if kind not in KINDS:
        return [f"kind is one of {', '.join(KINDS)}."]
    return _strings(data) or DATA_RULES[kind](data)


def keys_of(kind: str, data: dict[str, str]) -> list[str]:
    """The names the portal records and shows: variables, files, the fields given."""
    return sorted(key for key, value in data.items() if kind in (ENV, FILE) or value)


def secret_clean(*, name: str | None, kind: str, data: Any) -> dict[str, str]:
    """The data, or SecretInvalid by field (`name` None: a replacement, named already)."""
    errors: dict[str, list[str]] = {}
    if name is not None and (problems := name_problems(name)):
        errors["name"] = problems
    if problems := data_problems(kind, data):
        errors["data"] = problems
    if errors:
        raise SecretInvalid(errors)
    return dict(data)


def path_problem(path: str, reserved: Iterable[str] = ()) -> str | None:
    """Why a secret's files may not be mounted at `path`, or None."""
    if len(path) > MAX_PATH or not PATH.fullmatch(path) or posixpath.normpath(path) != path \
            or path == "/" or "/../" in f"{path}/" or "/./" in f"{path}/":
        return (f"path is an absolute directory such as /run/secrets/hf, of letters, digits, "
                f"'-', '_', '.' and '/', at most {MAX_PATH} characters.")
    for taken in (*CONTAINER_SYSTEM_PATHS, *reserved):
        if path_overlaps(path, taken):
            return f"{path} would cover {taken}, which the container needs."
    return None


def secret_uses_clean(*, refs: list[dict[str, Any]], identity: Identity | None,
                      tenant: Tenant | None, reserved: Iterable[str] = (),
                      env_names: Iterable[str] = ()) -> list[SecretUse]:
    """A launch's `secrets` ([{secret: id, path?}]) as SecretUses, or SecretInvalid with the
    errors under "secrets": each must be one the caller may use in the launching project,
    named once; a path only for `file` and `s3` secrets, outside `reserved` and the others';
    a variable set once (not also in the launch's `env_names`); at most one `s3` secret (its
    variables are the standard AWS ones)."""
    if len(refs) > MAX_SECRETS_PER_LAUNCH:
        raise SecretInvalid({"secrets": [f"At most {MAX_SECRETS_PER_LAUNCH} secrets."]})
    usable = Secret.objects.restrict(identity, "launch").select_related("tenant")
    if tenant is not None:
        usable = usable.filter(tenant=tenant)
    rows = {row.pk: row for row in usable.filter(pk__in=[ref["secret"] for ref in refs])}
    problems: list[str] = []
    uses: list[SecretUse] = []
    seen: set[int] = set()
    for index, ref in enumerate(refs):
        where = f"secrets[{index}]"
        row = rows.get(ref["secret"])
        if row is None:
            problems.append(f"{where}: no secret {ref['secret']} you may use in this project.")
            continue
        if row.pk in seen:
            problems.append(f"{where}: {row.name} is named twice.")
            continue
        seen.add(row.pk)
        if row.lost_at is not None:
            problems.append(f"{where}: the value of {row.name} was lost (its project's "
                            "namespace was made again); give it a new value first.")
            continue
        path = ref.get("path") or ""
        if row.kind in (ENV, REGISTRY):
            if path:
                problems.append(f"{where}: {row.name} is a {row.kind} secret: it has no files "
                                "to mount at a path.")
                continue
        else:
            path = path or default_path(row.name)
            if refusal := path_problem(path, reserved):
                problems.append(f"{where}: {refusal}")
                continue
        uses.append(SecretUse(name=row.name, kind=row.kind, object_name=row.object_name,
                              keys=tuple(row.keys), path=path))
    problems += _clashes(uses, set(env_names))
    if problems:
        raise SecretInvalid({"secrets": problems})
    return uses


def _clashes(uses: list[SecretUse], env_names: set[str]) -> list[str]:
    problems = []
    if sum(use.kind == S3 for use in uses) > 1:
        problems.append("At most one s3 secret: each sets the same AWS variables.")
    taken: dict[str, str] = {name: "the launch's env" for name in env_names}
    paths: dict[str, str] = {}
    for use in uses:
        for variable in use.env_names:
            if variable in taken:
                problems.append(f"{use.name} sets {variable}, which {taken[variable]} sets "
                                "too.")
            taken.setdefault(variable, use.name)
        if use.path:
            clash = next((name for path, name in paths.items() if path_overlaps(path, use.path)),
                         None)
            if clash is not None:
                problems.append(f"{use.name} and {clash} would be mounted at overlapping paths.")
            paths[use.path] = use.name
    return problems
