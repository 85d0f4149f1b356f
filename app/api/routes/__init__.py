"""The routers, one per resource. A route never imports another route."""
