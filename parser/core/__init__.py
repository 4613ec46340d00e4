"""The ground floor: what every floor uses (errors, durable append, URLs, the record shape, clock,
logs, locks)."""
