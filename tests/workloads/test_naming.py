"""Workload names: the Kubernetes name is derived, always valid and unique per workload."""

import re

import pytest

from catalogue.fields import invisible_characters
from kube.labels import MAX_OBJECT_NAME, workload_object_name
from workloads.naming import display_name_clean

# a DNS-1035 label (what a Service name must be): also a DNS-1123 label
DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")


@pytest.mark.parametrize(("workload_id", "display_name", "expected"), [
    (42, "my notebook", "wl-42-my-notebook"),
    (42, "My Notebook!!", "wl-42-my-notebook"),
    (7, "Équipe — Vision #2", "wl-7-equipe-vision-2"),
    (7, "视觉实验", "wl-7"),
    (7, "", "wl-7"),
    (7, "---", "wl-7"),
    (0, "x", "wl-0-x"),
    (123, "a" * 200, "wl-123-" + "a" * (MAX_OBJECT_NAME - 7)),
    (9, "a" * 46 + "-b", "wl-9-" + "a" * 46),  # a cut never leaves a dash at the end
])
def test_names(workload_id, display_name, expected):
    assert workload_object_name(workload_id, display_name) == expected


@pytest.mark.parametrize("display_name", [
    "", " ", "🚀🔥", "a" * 500, "DROP TABLE;--", "名前", "x\ny\tz", "-a-", "ÀÉÎÕÜ" * 30,
])
@pytest.mark.parametrize("workload_id", [0, 1, 99999, 10**30])
def test_always_a_valid_name(workload_id, display_name):
    name = workload_object_name(workload_id, display_name)
    assert len(name) <= MAX_OBJECT_NAME
    assert DNS1035.match(name), name
    assert name == workload_object_name(workload_id, display_name)


def test_different_ids_never_collide():
    # ids whose digits run into each other, with display names built to look alike
    names = {}
    for workload_id in [*range(1, 300), 10**20, 10**20 + 1]:
        for display_name in ["", "1", "2-x", "12", "x", "a" * 80]:
            name = workload_object_name(workload_id, display_name)
            names.setdefault(name, set()).add(workload_id)
    assert all(len(ids) == 1 for ids in names.values())
    # the id reads back from the name
    for name, ids in names.items():
        assert int(re.match(r"^wl-(\d+)(-|$)", name).group(1)) == next(iter(ids))


@pytest.mark.parametrize("workload_id", [-1, True, 1.5, "3", 10**60])
def test_bad_ids(workload_id):
    with pytest.raises(ValueError):
        workload_object_name(workload_id, "x")


@pytest.mark.parametrize(("text", "expected"), [
    ("  my   notebook  ", "my notebook"),
    ("line\none\ttab", "line one tab"),
    ("Équipe 视觉 🚀", "Équipe 视觉 🚀"),
    ("e\u0301", "é"),  # NFC
    ("a" * 150, "a" * 100),
    ("x" * 99 + " y", "x" * 99),
    # the joiners where they join visible characters: an emoji sequence, a Persian word
    ("👩\u200d🔬 lab", "👩\u200d🔬 lab"),
    ("می\u200cخواهم", "می\u200cخواهم"),
])
def test_display_name_clean(text, expected):
    assert display_name_clean(text) == expected


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty_display_name_is_refused(text):
    with pytest.raises(ValueError, match="Give the workload a name"):
        display_name_clean(text)


@pytest.mark.parametrize(("text", "named"), [
    ("safe\u202eevil", "U+202E RIGHT-TO-LEFT OVERRIDE"),  # would disguise the name
    ("\u2066isolated\u2069", "U+2066 LEFT-TO-RIGHT ISOLATE"),
    ("zero\u200bwidth", "U+200B ZERO WIDTH SPACE"),
    ("\ufeffbom", "U+FEFF ZERO WIDTH NO-BREAK SPACE"),
    ("soft\u00adhyphen", "U+00AD SOFT HYPHEN"),
    ("tag\U000e0041", "U+E0041 TAG LATIN CAPITAL LETTER A"),
    ("ad\u200dmin", "U+200D ZERO WIDTH JOINER"),  # between ASCII letters it only disguises
    ("nul\x00here", "U+0000 control character"),
    ("bell\x07 here", "U+0007 control character"),
    ("lone \ud800 surrogate", "U+D800 lone surrogate"),
    ("\u202e", "U+202E RIGHT-TO-LEFT OVERRIDE"),
])
def test_invisible_characters_are_refused_not_removed(text, named):
    assert invisible_characters(text)[0] == named
    with pytest.raises(ValueError, match="invisible character") as refused:
        display_name_clean(text)
    assert named in str(refused.value)
