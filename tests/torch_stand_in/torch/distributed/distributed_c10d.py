_default_store = None


def _get_default_store():
    if _default_store is None:
        raise RuntimeError("Default process group has not been initialized")
    return _default_store
