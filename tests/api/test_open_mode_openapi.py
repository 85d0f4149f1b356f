"""Open mode (no API keys) declares no security in the OpenAPI description: /docs would
otherwise show every operation locked and ask for a key no one has (issue 25)."""

from __future__ import annotations

from tests.client import TestClient


def test_open_mode_declares_no_security(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "bearer" not in spec.get("components", {}).get("securitySchemes", {})
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            assert "security" not in operation, (path, method)
