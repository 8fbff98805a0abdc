import pytest
from harness import make_data


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("integrations")
    return folder, make_data(folder)
