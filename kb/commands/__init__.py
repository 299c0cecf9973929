"""One module per ``kb`` verb."""
