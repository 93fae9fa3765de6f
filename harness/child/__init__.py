"""The child side: everything here runs in the sandboxed process beside the student's code.

It imports torch and the student's module, builds the module for the configurations asked for, finds its weights,
and answers requests with plain arrays and short texts.  Nothing here decides a verdict, and nothing here is
imported by the trusted process (a test enforces both).
"""
