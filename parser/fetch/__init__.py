"""HTTP and files in, with every limit; charset, feed discovery, rate limits, and the worker loop that
hands work out by host."""
