"""rldata.trainer."""
