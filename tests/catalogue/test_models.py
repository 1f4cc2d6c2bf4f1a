"""The catalogue's models' own logic: the address a user opens (a template's URL format)."""

import pytest

from catalogue.models import Template, open_url

BASE = "http://192.168.1.245:8888"


@pytest.mark.parametrize(("url_format", "url"), [
    ("{base}/", f"{BASE}/"),
    ("{base}/lab", f"{BASE}/lab"),
    # a format written before the proxies still never puts the token in the URL
    ("{base}/lab?token={token}", f"{BASE}/lab"),
    ("{base}/?a=1&token={token}", f"{BASE}/?a=1"),
    ("{base}/{token}", f"{BASE}/"),
])
def test_the_url_never_carries_the_token(url_format, url):
    assert open_url(url_format, BASE) == url


@pytest.mark.django_db
def test_the_seeded_jupyter_template_opens_without_its_token():
    # migration 0004: the proxy hands Jupyter its token, so the URL no longer asks for it
    assert Template.objects.get(slug="jupyter").url_format == "{base}/lab"
    assert not Template.objects.filter(url_format__contains="{token}").exists()


@pytest.mark.django_db
def test_only_digits_is_seeded_to_run_as_root():
    # migration 0007: the custom template runs as uid 1000, so that custom
    # images pass Pod Security "restricted" like the other templates; DIGITS's image needs root
    seeded = {t.slug: (t.allow_root, t.run_as_user) for t in Template.objects.all()}
    assert seeded == {"jupyter": (False, 1000), "digits": (True, None),
                      "tensorboard": (False, 1000), "custom": (False, 1000),
                      "pytorch-ddp": (False, 1000), "mpi": (False, 1000),
                      "code-server": (False, 1000)}
