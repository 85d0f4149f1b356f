"""``make demo``: calibrators fitted on real data that ships with scikit-learn, shown in the
web view. :mod:`demo.fits` builds the batches and posts them; :mod:`demo.server` starts a
service of its own when none answers; ``python -m demo`` runs both and prints where to look.

scikit-learn is a test dependency of the project, never the service's: only this package
imports it, and ``make demo`` installs the test extras first.
"""
