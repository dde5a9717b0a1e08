"""Low-level helpers every stage may import (and which import no feature module).

``registry`` (one generic registry for every extension point), ``rules`` (every threshold once),
``runtime`` (seeds, software versions, staged outputs), ``vocab`` (setups, marker styles,
transforms).
"""
