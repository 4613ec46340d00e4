"""The cyclic technique: every feed source polled on its interval, and what one poll's outcome does."""
