"""The admin's capacity pages on the real control plane: the GPU type catalogue's capacity table
(nodes, allocatable, held, free, largest node) read from the real Nodes, flags for types no node
serves, a shared type the KWOK nodes' labels contradict, unclaimed nodes, and the banner when the API server is unreachable — the kubesim suite's
tests (tests/catalogue/test_admin_pages.py), re-run here."""

import pytest

from tests.catalogue.test_admin_pages import (  # noqa: F401 - collected here, against the real cluster
    test_a_shared_type_is_created_and_the_nodes_labels_check_it,
    test_a_type_no_node_serves_is_flagged,
    test_an_unreachable_cluster_shows_a_banner_and_the_catalogue,
    test_the_capacity_table_for_the_demo_cluster,
)
from tests.support.pages import admin  # noqa: F401 - a fixture

pytestmark = [pytest.mark.django_db, pytest.mark.realcluster]
