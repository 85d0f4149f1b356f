"""``python -m calibration_client``: the ``calibration`` command."""

from calibration_client.cli import main

raise SystemExit(main())
