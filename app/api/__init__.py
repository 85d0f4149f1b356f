"""The HTTP layer: routers, schemas, body parsing and problem+json errors."""
