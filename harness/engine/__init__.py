"""The verdict: run the checks against the numpy reference through the child, diagnose, return a `Report`."""
