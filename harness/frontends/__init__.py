"""The ways in: the command line, batch grading, the notebook API, the pytest plugin, teaching and trace."""
