"""Image references: the distribution/reference grammar, and registry allow-lists."""

import pytest

from catalogue.images import (
    image_allowed,
    image_refusal,
    parse_image_reference,
    validate_image_prefix,
    validate_image_reference,
)

SHA = "sha256:" + "0123456789abcdef" * 4

VALID = [
    # (typed, returned)
    ("ubuntu", "ubuntu"),
    ("ubuntu:24.04", "ubuntu:24.04"),
    ("library/ubuntu:latest", "library/ubuntu:latest"),
    ("pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch:24.01-py3"),
    ("nvcr.io/nvidia/digits:21.09-tensorflow-py3", "nvcr.io/nvidia/digits:21.09-tensorflow-py3"),
    ("quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17",
     "quay.io/jupyter/pytorch-notebook:cuda12-2024-06-17"),
    ("localhost/x", "localhost/x"),
    ("localhost:5000/x", "localhost:5000/x"),
    ("localhost:5000/team/x:v1", "localhost:5000/team/x:v1"),
    ("registry.example.com:8443/a/b/c/d:tag_1", "registry.example.com:8443/a/b/c/d:tag_1"),
    ("Registry.Example.COM/team/app:1", "registry.example.com/team/app:1"),  # host lower-cased
    ("192.168.1.10:5000/ml/train:v2", "192.168.1.10:5000/ml/train:v2"),
    ("[::1]:5000/ml/train", "[::1]:5000/ml/train"),
    (f"ubuntu@{SHA}", f"ubuntu@{SHA}"),
    (f"nvcr.io/nvidia/pytorch:24.01-py3@{SHA}", f"nvcr.io/nvidia/pytorch:24.01-py3@{SHA}"),
    ("team/a.b_c__d-e--f", "team/a.b_c__d-e--f"),
    ("x:" + "T" * 128, "x:" + "T" * 128),  # tags may have capitals, up to 128 characters
    ("x:_private", "x:_private"),
    ("  ubuntu:24.04\n", "ubuntu:24.04"),  # pasted with surrounding whitespace
    ("a" * 255 + ":tag", "a" * 255 + ":tag"),
]

INVALID = [
    # (typed, part of the message)
    ("", "Enter an image reference"),
    ("   ", "Enter an image reference"),
    ("ubuntu;rm -rf /", "spaces"),
    (";rm-rf", "cannot contain “;”"),
    ("ubuntu&&id", "cannot contain “&”"),
    ("$(id)", "cannot contain “$” “(” “)”"),
    ("`id`", "cannot contain “`”"),
    ("ubuntu|sh", "cannot contain “|”"),
    ("ubuntu>x", "cannot contain “>”"),
    ("ubuntu latest", "spaces"),
    ("ubun\ttu", "spaces"),
    ('"ubuntu"', "cannot contain “\"”"),
    ("'ubuntu'", "cannot contain “'”"),
    ("ubuntu\\x", "cannot contain “\\”"),
    ("Ubuntu", "lower-case"),
    ("nvcr.io/NVIDIA/pytorch", "lower-case"),
    ("ubuntu:", "tag after “:” is empty"),
    ("ubuntu:" + "a" * 129, "longer than 128"),
    ("ubuntu:-x", "not a valid tag"),
    ("ubuntu:.x", "not a valid tag"),
    ("ubuntu:ta/g", "not a valid registry host"),  # a "/" after ":" makes "ubuntu:ta" a host
    ("a//b", "empty component"),
    ("nvcr.io/", "no repository name"),
    ("a.b_c/x", "not a valid registry host"),  # a "." makes the first component the host
    ("/ubuntu", "empty component"),
    ("a/../b", "not a valid repository name component"),
    ("a..b", "not a valid repository name component"),
    ("-ubuntu", "not a valid repository name component"),
    ("ubuntu-", "not a valid repository name component"),
    ("a___b", "not a valid repository name component"),
    ("ubuntu@", "not a valid digest"),
    ("ubuntu@sha256:abc", "not a valid digest"),
    ("ubuntu@sha256:" + "A" * 64, "64 lower-case hex"),
    ("ubuntu@sha256:" + "a" * 63 + "0a", "64 lower-case hex"),
    ("ubuntu@md5@x", "not a valid digest"),
    ("-x.io/a", "not a valid registry host"),
    ("reg.io:port/a", "not a valid registry host"),
    ("a" * 256, "longer than 255"),
    ("ubuntu\x00", "cannot contain"),
    ("ubüntu", "cannot contain “ü”"),
]


@pytest.mark.parametrize(("ref", "expected"), VALID)
def test_valid_references(ref, expected):
    assert validate_image_reference(ref) == expected


@pytest.mark.parametrize(("ref", "message"), INVALID)
def test_invalid_references(ref, message):
    with pytest.raises(ValueError) as excinfo:
        validate_image_reference(ref)
    assert message in str(excinfo.value)


def test_the_table_is_large_enough():
    assert len(VALID) + len(INVALID) >= 25


@pytest.mark.parametrize(("ref", "repository"), [
    ("ubuntu", "docker.io/library/ubuntu"),
    ("pytorch/pytorch:2.3.0", "docker.io/pytorch/pytorch"),
    ("docker.io/ubuntu", "docker.io/library/ubuntu"),
    ("index.docker.io/library/ubuntu", "docker.io/library/ubuntu"),
    ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io/nvidia/pytorch"),
    ("localhost:5000/x", "localhost:5000/x"),
])
def test_qualified_repository(ref, repository):
    assert parse_image_reference(ref).repository == repository


@pytest.mark.parametrize(("ref", "prefixes", "allowed"), [
    ("anything/at:all", [], True),
    ("nvcr.io/nvidia/pytorch:24.01-py3", ["nvcr.io/nvidia"], True),
    ("nvcr.io/nvidia/pytorch:24.01-py3", ["nvcr.io"], True),
    ("nvcr.io/nvidia/pytorch:24.01-py3", ["nvcr.io/nvidia/"], True),
    ("nvcr.io/nvidiax/pytorch:1", ["nvcr.io/nvidia"], False),
    ("nvcr.io/nvidia", ["nvcr.io/nvidia/pytorch"], False),
    ("nvcr.io.evil.com/nvidia/pytorch", ["nvcr.io"], False),
    ("evil.com/nvcr.io/nvidia/pytorch", ["nvcr.io"], False),
    ("ubuntu:24.04", ["docker.io/library"], True),
    ("ubuntu:24.04", ["nvcr.io"], False),
    ("pytorch/pytorch:2.3.0", ["pytorch"], True),  # a prefix without registry: Docker Hub
    ("pytorch/pytorch:2.3.0", ["docker.io/pytorch"], True),
    ("pytorch/pytorch:2.3.0", ["index.docker.io/pytorch"], True),
    ("pytorchx/pytorch", ["pytorch"], False),
    ("localhost:5000/x", ["localhost:5000"], True),
    ("localhost:5001/x", ["localhost:5000"], False),
    ("NVCR.io/nvidia/x", ["nvcr.io/nvidia"], True),
    ("quay.io/jupyter/base-notebook", ["nvcr.io/nvidia", "quay.io/jupyter"], True),
    ("nvcr.io/nvidia/pytorch;id", ["nvcr.io/nvidia"], False),  # invalid never matches
    ("nvcr.io/nvidia/pytorch", ["not a prefix!"], False),  # typos allow nothing
])
def test_image_allowed(ref, prefixes, allowed):
    assert image_allowed(ref, prefixes) is allowed


@pytest.mark.parametrize(("prefix", "expected"), [
    ("nvcr.io/nvidia", "nvcr.io/nvidia"),
    ("nvcr.io/nvidia/", "nvcr.io/nvidia"),
    ("pytorch", "docker.io/pytorch"),
    ("Quay.IO", "quay.io"),
])
def test_validate_image_prefix(prefix, expected):
    assert validate_image_prefix(prefix) == expected


@pytest.mark.parametrize("prefix", ["", "/", "nvcr.io/NVIDIA", "nvcr.io/nvidia@sha256", "a b"])
def test_invalid_image_prefix(prefix):
    with pytest.raises(ValueError):
        validate_image_prefix(prefix)


@pytest.mark.parametrize(("ref", "site", "tenant", "refusal"), [
    ("nvcr.io/nvidia/pytorch:24.01-py3", [], [], None),
    ("nvcr.io/nvidia/pytorch:24.01-py3", ["nvcr.io/nvidia"], ["nvcr.io"], None),
    ("ubuntu:24.04", ["nvcr.io/nvidia", "quay.io"], [],
     "Images must come from the site's registries: nvcr.io/nvidia, quay.io."),
    ("quay.io/x/y", ["quay.io"], ["nvcr.io"], "lab may only use images from: nvcr.io."),
    # a tenant's list never widens the site's
    ("ubuntu:24.04", ["nvcr.io"], ["docker.io/library"],
     "Images must come from the site's registries: nvcr.io."),
])
def test_an_image_must_be_inside_the_sites_and_the_tenants_lists(ref, site, tenant, refusal):
    assert image_refusal(ref, site=site, tenant=tenant, tenant_name="lab") == refusal


def test_a_typo_in_the_sites_registries_stops_the_start(settings):
    from workloads.checks import image_registries_valid

    settings.PORTAL_IMAGE_REGISTRIES = ["nvcr.io/nvidia", "nvcr.io/NVIDIA"]
    (error,) = image_registries_valid(None)
    assert error.id == "workloads.E001" and "lower-case" in error.msg
    settings.PORTAL_IMAGE_REGISTRIES = ["nvcr.io/nvidia", "quay.io"]
    assert image_registries_valid(None) == []


@pytest.mark.parametrize(("ref", "allowed"), [
    ("nvidia/cuda:12.4.1-runtime-ubuntu22.04", True),  # where most CUDA examples start
    ("docker.io/nvidia/cuda:12.4.1-devel-ubuntu22.04", True),
    ("nvcr.io/nvidia/pytorch:24.01-py3", True),
    ("python:3.12", True),
    ("nvidia-evil/cuda:12", False),
    ("localhost:5000/nvidia/cuda:12", False),
])
def test_the_demos_registries(ref, allowed):
    from stack.demo import DEMO_REGISTRIES

    assert image_allowed(ref, list(DEMO_REGISTRIES)) is allowed
