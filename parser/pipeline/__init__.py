"""A record's way after parsing: full text, identity, uniqueness, staging, inbox, quarantine, history."""
