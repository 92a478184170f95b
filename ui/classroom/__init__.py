"""A live class on the page, one job a module: ``handle`` (the store's classes and the
versions a poll reads), ``membership`` (joining, leaving, following, a session's seat),
``teacher`` (starting, moving, ending, the join slide), ``votes`` (a question's vote),
``polling`` (the one-second tick), ``panel`` (the sidebar's class panel). The class
itself lives in the store (server.classes); nothing here does tensor math."""
