"""Secrets on the real control plane (tests/credentials/): the portal's ServiceAccount writes,
replaces and deletes a secret's Kubernetes Secret, and a launch's pod spec reaches the real API
server with its variables by secretKeyRef and its registry login as imagePullSecrets; the value
is in no other object of the namespace; a registry secret's login, read back from the real API
server, resolves its image in the real private registry on loopback (a wrong one is refused
before any pod); the sweep, as the portal's ServiceAccount, lists the
portal's Secrets in every namespace, marks a secret whose Secret is gone lost and deletes one no
row holds. Validation and roles decide in the portal and run once,
on kubesim."""

import pytest

from tests.credentials.test_api import (  # noqa: F401 - collected here, against the real cluster
    test_a_cluster_that_does_not_answer_is_503_and_nothing_is_recorded,
    test_a_member_makes_a_secret_of_their_own_and_never_reads_its_value_back,
    test_a_registry_outside_the_sites_registries_is_refused,
    test_replace_is_write_only_and_delete_takes_the_value_away,
)
from tests.credentials.test_launch import (  # noqa: F401 - collected here, against the real cluster
    test_an_env_secret_reaches_the_pod_by_reference_and_its_value_nowhere_else,
    test_each_kind_of_secret_in_a_batch_job,
)
from tests.credentials.test_registry_pull import (  # noqa: F401 - collected here, against the real cluster
    test_a_password_changed_at_the_registry_is_refused_before_any_pod,
    test_a_registry_outside_the_sites_registries_is_refused_whatever_the_secret,
    test_the_secrets_login_resolves_the_image_and_the_pod_pulls_with_exactly_it,
)
from tests.credentials.test_sweep import (  # noqa: F401 - collected here, against the real cluster
    test_a_secret_no_row_holds_is_deleted,
    test_a_secret_whose_value_is_gone_is_lost_until_given_again,
)
from tests.support.journeys import vision  # noqa: F401 - what the tests use
from tests.support.registry import (  # noqa: F401 - what the tests use
    htpasswd_registry,
    registries_allowed,
    token_registry,
)

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster, pytest.mark.timeout(180)]
