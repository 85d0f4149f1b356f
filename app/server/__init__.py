"""The process around the ASGI app: start-up, migrations, and uvicorn's protocol with
deadlines and connection limits."""
