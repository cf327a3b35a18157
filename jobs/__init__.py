"""rldata.jobs."""
