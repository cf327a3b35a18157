"""Runs: the ``runs`` table (one row per job invocation, :mod:`~rldata.runs.core`), its readable list
(``rldata runs``, :mod:`~rldata.runs.listing`) and the experiment trackers every metric row is
streamed to (:mod:`~rldata.runs.trackers`)."""
