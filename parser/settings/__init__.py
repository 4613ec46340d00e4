"""params.py read and checked once into one immutable Settings (LINK_JOBS too), and what one run of the
daemon does."""
