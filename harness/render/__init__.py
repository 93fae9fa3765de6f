"""A `Report` as text, JSON, HTML, Gradescope results, JUnit XML or a picture: no checking happens here."""
