"""Fixtures of the in-process operator tests."""

from __future__ import annotations

import pytest
from tls_certs import ServingCert, issue_serving_cert


@pytest.fixture(scope="session")
def serving_cert(tmp_path_factory: pytest.TempPathFactory) -> ServingCert:
    return issue_serving_cert(tmp_path_factory.mktemp("webhook-tls"))
