"""Container image references: the distribution/reference grammar, and registry allow-lists.

An image reference is what a researcher types and what ends up in the pod spec, so it is checked
against the grammar container runtimes use (github.com/distribution/reference):

    reference        := name [ ":" tag ] [ "@" digest ]
    name             := [ domain "/" ] path-component [ "/" path-component ]*
    domain           := host [ ":" port ]
    host             := domain-component [ "." domain-component ]* | "[" IPv6 "]"
    domain-component := [a-zA-Z0-9] | [a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]
    path-component   := [a-z0-9]+ ( ( "." | "_" | "__" | "-"+ ) [a-z0-9]+ )*
    tag              := [\\w][\\w.-]{0,127}
    digest           := algorithm ":" hex     (sha256: 64 hex digits, sha512: 128)

The name is at most 255 characters. As in Docker, the first component is the registry when it
holds a "." or a ":", is "localhost", or has capitals; otherwise the image is on Docker Hub
(`ubuntu` is `docker.io/library/ubuntu`, `pytorch/pytorch` is `docker.io/pytorch/pytorch`).

Nothing here runs a shell or talks to a registry: a valid reference may still not exist.
"""

from __future__ import annotations

import dataclasses
import re

MAX_NAME_LENGTH = 255
DOCKER_HUB = "docker.io"
_DOCKER_HUB_ALIASES = ("index.docker.io", "registry-1.docker.io")
DEFAULT_TAG = "latest"

_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[a-fA-F0-9:]+\])"
DOMAIN = re.compile(rf"{_HOST}(?::[0-9]+)?", re.ASCII)
PATH_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*", re.ASCII)
TAG = re.compile(r"[\w][\w.-]{0,127}", re.ASCII)
DIGEST = re.compile(r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}",
                    re.ASCII)
# OCI image-spec: the registered algorithms have a fixed, lower-case encoding
_REGISTERED_DIGEST_LENGTHS = {"sha256": 64, "sha512": 128}
# every character that may appear anywhere in a reference; anything else is named in the error
_ALPHABET = re.compile(r"[A-Za-z0-9._\-/:@+\[\]]", re.ASCII)


@dataclasses.dataclass(frozen=True)
class ImageReference:
    domain: str | None  # as written (lower-cased); None: Docker Hub implied
    path: str
    tag: str | None = None
    digest: str | None = None

    def __str__(self) -> str:
        text = f"{self.domain}/{self.path}" if self.domain else self.path
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text

    @property
    def repository(self) -> str:
        """The fully qualified name without tag or digest: `docker.io/library/ubuntu`."""
        domain = self.domain or DOCKER_HUB
        if domain in _DOCKER_HUB_ALIASES:
            domain = DOCKER_HUB
        path = self.path
        if domain == DOCKER_HUB and "/" not in path:
            path = f"library/{path}"
        return f"{domain}/{path}"


def _looks_like_domain(component: str) -> bool:
    return ("." in component or ":" in component or component == "localhost"
            or component != component.lower())


def _split_domain(name: str) -> tuple[str | None, str]:
    first, sep, rest = name.partition("/")
    if sep and _looks_like_domain(first):
        return first, rest
    return None, name


def _check_domain(domain: str) -> str:
    if not DOMAIN.fullmatch(domain):
        raise ValueError(f"“{domain}” is not a valid registry host (with an optional :port).")
    return domain.lower()


def _check_path(path: str) -> None:
    if not path:
        raise ValueError("The image reference has no repository name.")
    for component in path.split("/"):
        if not component:
            raise ValueError("The repository name has an empty component (“//” or a “/” at an end).")
        if component != component.lower():
            raise ValueError(f"The repository name must be lower-case: “{component}”.")
        if not PATH_COMPONENT.fullmatch(component):
            raise ValueError(
                f"“{component}” is not a valid repository name component: use lower-case letters "
                "and digits, separated by single “.”, “_”, “__” or dashes."
            )


def _check_tag(tag: str) -> None:
    if not tag:
        raise ValueError("The tag after “:” is empty.")
    if len(tag) > 128:
        raise ValueError("The tag is longer than 128 characters.")
    if not TAG.fullmatch(tag):
        raise ValueError(
            f"“{tag}” is not a valid tag: letters, digits, “_”, “.” and “-”, not starting with "
            "“.” or “-”."
        )


def _check_digest(digest: str) -> None:
    if not DIGEST.fullmatch(digest):
        raise ValueError(f"“{digest}” is not a valid digest (algorithm:hex, e.g. sha256:…).")
    algorithm, _, encoded = digest.partition(":")
    length = _REGISTERED_DIGEST_LENGTHS.get(algorithm)
    if length is not None and not re.fullmatch(rf"[a-f0-9]{{{length}}}", encoded):
        raise ValueError(f"A {algorithm} digest is {length} lower-case hex digits.")


def parse_image_reference(ref: str) -> ImageReference:
    """The parts of a reference, or ValueError with a message a researcher can act on.

    Surrounding whitespace (from copy and paste) is dropped; any other whitespace is an error.
    """
    ref = ref.strip()
    if not ref:
        raise ValueError("Enter an image reference such as nvcr.io/nvidia/pytorch:24.01-py3.")
    if any(ch.isspace() for ch in ref):
        raise ValueError("An image reference cannot contain spaces.")
    bad = sorted({ch for ch in ref if not _ALPHABET.fullmatch(ch)})
    if bad:
        shown = " ".join(f"“{ch}”" for ch in bad)
        raise ValueError(f"An image reference cannot contain {shown}.")

    name, at, digest = ref.partition("@")
    if at:
        _check_digest(digest)
    # the tag is after the last ":" that follows the last "/" (a ":" before it is a port)
    slash = name.rfind("/")
    colon = name.rfind(":")
    tag: str | None = None
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        _check_tag(tag)
    if len(name) > MAX_NAME_LENGTH:
        raise ValueError(f"The repository name is longer than {MAX_NAME_LENGTH} characters.")

    domain, path = _split_domain(name)
    if domain is not None:
        domain = _check_domain(domain)
    _check_path(path)
    return ImageReference(domain=domain, path=path, tag=tag, digest=digest if at else None)


def validate_image_reference(ref: str) -> str:
    """The reference, trimmed and with its registry host lower-cased, or ValueError.

    The familiar form is kept (`pytorch/pytorch:2.3.0` stays so): it is what the researcher
    typed and what Kubernetes accepts; `ImageReference.repository` gives the qualified name.
    """
    return str(parse_image_reference(ref))


def _prefix_components(prefix: str) -> list[str]:
    """An allow-list entry as the components of a qualified name: `nvcr.io/nvidia` →
    ["nvcr.io", "nvidia"]. An entry without a registry is a Docker Hub path."""
    prefix = prefix.strip().strip("/")
    if not prefix:
        raise ValueError("An empty registry prefix.")
    if "@" in prefix or any(ch.isspace() for ch in prefix):
        raise ValueError(f"“{prefix}” is not a registry or repository prefix.")
    first, _, rest = prefix.partition("/")
    if _looks_like_domain(first):
        domain, path = _check_domain(first), rest
    else:
        domain, path = DOCKER_HUB, prefix
    if domain in _DOCKER_HUB_ALIASES:
        domain = DOCKER_HUB
    if path:
        _check_path(path)
    return [domain, *path.split("/")] if path else [domain]


def validate_image_prefix(prefix: str) -> str:
    """An admin's allow-list entry, qualified (`nvidia` → `docker.io/nvidia`), or ValueError."""
    return "/".join(_prefix_components(prefix))


def image_allowed(ref: str, prefixes: list[str]) -> bool:
    """Whether the image is under one of the allowed registries/prefixes.

    An empty list allows every image. Matching is on whole name components of the qualified
    name, so `nvcr.io/nvidia` allows `nvcr.io/nvidia/pytorch:24.01-py3` but not
    `nvcr.io/nvidiax/x`; tags and digests play no part. Invalid references and invalid
    entries never match (an allow-list of typos allows nothing rather than everything).
    """
    if not prefixes:
        return True
    try:
        components = parse_image_reference(ref).repository.split("/")
    except ValueError:
        return False
    for prefix in prefixes:
        try:
            wanted = _prefix_components(prefix)
        except ValueError:
            continue
        if components[: len(wanted)] == wanted:
            return True
    return False


def image_refusal(ref: str, *, site: list[str], tenant: list[str],
                  tenant_name: str) -> str | None:
    """Why an image may not run (None: it may). It must be inside the site's registries
    (PORTAL_IMAGE_REGISTRIES) and the tenant's prefixes alike; an empty list allows any."""
    if not image_allowed(ref, site):
        return f"Images must come from the site's registries: {', '.join(site)}."
    if not image_allowed(ref, tenant):
        return f"{tenant_name} may only use images from: {', '.join(tenant)}."
    return None
