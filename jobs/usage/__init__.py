"""Usage: the tokens each person spent, per model and per day, on a page, in /api/usage/ and as CSV — read from
the usage ledger (jobs.models.Usage), which each job's end adds to."""
