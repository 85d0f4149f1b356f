"""The read-only web view at ``/ui``: server-rendered pages of the calibrators, their versions'
reliability diagrams, comparisons and monitoring (Jinja2 templates, one CSS file, no
JavaScript).

- :mod:`app.ui.session`: who may see the pages (a signed session cookie, decided before
  routing by :mod:`app.api.security`, the one place that decides);
- :mod:`app.ui.pages`: the pages' contents, read through the service layer;
- :mod:`app.ui.routes`: the routes, the key form and the error pages.
"""
