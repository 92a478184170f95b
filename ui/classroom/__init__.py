"""A live class on the page, one job a module: ``handle`` (the store's classes and the
versions a poll reads), ``membership`` (joining, leaving, following, a session's seat),
``teacher`` (starting, moving, ending, the join slide), ``votes`` (a question's vote),
``polling`` (the one-second tick), ``panel`` (the sidebar's class panel). The class
itself lives in the store (server.classes); nothing here does tensor math."""


def reset_caches() -> None:
    """Forget what this process has read or holds of the store's classes and rooms: the
    classes' handle, the versions polled, the wrong codes counted, the rooms' store and
    the texts read at each room version — after the store was replaced (a test's own)."""
    from .. import room_work
    from . import handle, room

    for cached in (handle._classes, handle.versions, handle.guesses, room_work.rooms, room.texts_at):
        cached.clear()
