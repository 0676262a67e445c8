"""Scripted runs: the demonstration (``sessionmem demo``), replaying a recorded transcript, and what they
share with the testing kit."""
