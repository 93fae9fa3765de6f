"""What crosses the process boundary: the frame format (`protocol`), the typed messages (`messages`) and the
configuration a module is built with (`config`).  Imported by both sides; no torch here."""
