"""A source: its options, its protocol's row, its schedule and state, one poll, OPML."""
