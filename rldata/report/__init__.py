"""Reports: what a store holds, as numbers, PNG plots and one self-contained HTML page.

- :mod:`rldata.report.overview`: the numbers (pass-rate histogram, buckets, retained share, savings);
- :mod:`rldata.report.page`: the selection page and its plots;
- :mod:`rldata.report.training`: the training page of one or more runs.

Nothing here is imported by ``import rldata`` (matplotlib loads only when a report is drawn).
"""
