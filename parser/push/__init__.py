"""The pushed protocols: the listener, webhook, WebSub, and a pushed body kept in the inbox."""
