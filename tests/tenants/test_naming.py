import random
import string

import pytest

from kube.labels import is_valid_namespace, is_valid_prefix, namespace_name, slug


def test_same_project_always_gets_the_same_name():
    a = namespace_name(project_name="Vision Lab", project_id="d964ebf8619749c3")
    assert a == namespace_name(project_name="Vision Lab", project_id="d964ebf8619749c3")
    assert a.startswith("gpu-vision-lab-")


def test_names_that_normalise_alike_still_differ():
    a = namespace_name(project_name="ML Lab", project_id="p1")
    b = namespace_name(project_name="ml-lab", project_id="p2")
    assert a != b
    assert a.startswith("gpu-ml-lab-") and b.startswith("gpu-ml-lab-")


@pytest.mark.parametrize(
    ("name", "expected_start"),
    [
        ("Équipe Vision", "gpu-equipe-vision-"),
        ("Straße_42", "gpu-strae-42-"),
        ("视觉实验室", "gpu-project-"),
        ("---", "gpu-project-"),
        ("kube-system", "gpu-kube-system-"),
    ],
)
def test_unicode_and_odd_names(name, expected_start):
    ns = namespace_name(project_name=name, project_id="abc")
    assert ns.startswith(expected_start)
    assert is_valid_namespace(ns)


def test_long_names_are_cut_to_a_dns_label():
    ns = namespace_name(project_name="a" * 300, project_id="x" * 64)
    assert len(ns) <= 63
    assert is_valid_namespace(ns)


def test_cut_never_leaves_a_trailing_dash_before_the_digest():
    ns = namespace_name(project_name="ab-" * 30, project_id="pid")
    assert "--" not in ns
    assert is_valid_namespace(ns)


def test_random_names_are_always_valid_labels():
    rng = random.Random(7)
    alphabet = string.printable + "äöüßéèçñ漢字Ωж-_ "
    seen = set()
    for i in range(2000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 80)))
        ns = namespace_name(project_name=name, project_id=f"project-{i}")
        assert is_valid_namespace(ns), (name, ns)
        seen.add(ns)
    assert len(seen) == 2000  # no two projects share a namespace


def test_slug_folds_accents_and_case():
    assert slug("Héllo  Wörld!") == "hello-world"


@pytest.mark.parametrize(("prefix", "ok"), [("", True), ("gpu-", True), ("t1", True),
                                             ("-x", False), ("GPU-", False), ("a" * 21, False)])
def test_prefix_validation(prefix, ok):
    assert is_valid_prefix(prefix) is ok
