"""The read-only web view at ``/ui``: server-rendered pages of the calibrators, their versions'
reliability diagrams, comparisons and monitoring (Jinja2 templates, one CSS file, no
JavaScript).

- :mod:`app.ui.routes`: the routes of the pages and the error page of any other path;
- :mod:`app.ui.pages`: each page's data (one dataclass a page), read through the service's
  use cases (:class:`app.service.browsing.Browsing`);
- :mod:`app.ui.page_responses`: a page or an error page as the answer, for every error
  under ``/ui`` too;
- :mod:`app.ui.templating`: the Jinja2 environment, its filters, the metrics the tables show
  and the headers every page carries (the problem pages render through it too);
- :mod:`app.ui.svg`: the service's SVG figures made fit to stand inside a page;
- :mod:`app.ui.signin`: the key form and signing out;

Who may see the pages is :mod:`app.access.sessions` (a signed session cookie, decided before
routing by :mod:`app.api.security`, the one place that decides).

``templates/`` and ``static/ui.css`` ship inside the package (pyproject's package-data).
"""
