"""``python -m radspatial.cli``: the same as the ``radspatial`` command."""

from radspatial.cli import main

raise SystemExit(main())
