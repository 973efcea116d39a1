"""The HTTP API: ``create_app(client, config)`` builds the FastAPI app; ``prme.http.server``
runs it with uvicorn."""

from prme.http.app import create_app

__all__ = ["create_app"]
