import pytest

from specops.planner import default_priors, load_catalogs


@pytest.fixture(scope="session")
def catalogs():
    return load_catalogs()


@pytest.fixture(scope="session")
def priors():
    return default_priors()
