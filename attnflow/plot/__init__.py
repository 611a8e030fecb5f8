"""Plotting: the only part of attnflow that imports matplotlib.

Pure functions taking arrays and an optional ``ax`` (and ``path`` to save); one private module per
topic, re-exported here.
"""

from ._common import clustered_fraction_curve as clustered_fraction_curve
