"""The inbox's index in a PostgreSQL message log (a throwaway cluster, ``tests/postgres.py``;
skipped without Debian's postgresql): random traffic against the whole log regrouped, a log of the
last round migrated in place, and two reviewers racing on one group."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.extras import requires_extra
from tests.postgres import Cluster, cluster_fixture, drop_tables  # noqa: F401 - the cluster fixture
from tests.review.test_index import check_migration, check_random_traffic, race_on_one_group

pytestmark = requires_extra("postgres", "psycopg", "sqlalchemy", "starlette")


@pytest.fixture
def database(cluster: Cluster) -> Iterator[str]:
    yield cluster.url
    from nlu_engine.review.decisions import review_metadata
    from nlu_engine.server.message_store import metadata

    drop_tables(cluster.url, review_metadata, metadata)


def test_the_index_equals_the_whole_log_regrouped_on_postgresql(database: str) -> None:
    check_random_traffic(database, 0.8, seed=11, rounds=20)


def test_a_log_of_the_last_round_is_migrated_in_place_on_postgresql(database: str) -> None:
    check_migration(database)


def test_two_reviewers_deciding_one_group_at_once_on_postgresql(database: str) -> None:
    race_on_one_group(database)
