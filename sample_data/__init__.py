"""rldata.sample_data."""
