# SPDX-License-Identifier: MIT
"""The list and set values an attribute read returns: in-place changes
commit (private to the package).

In PyTorch ``config.some_set.add("x")`` changes the stored value (the read
returns the stored object). Here a read returns a fresh copy, so a change
to it would be lost; the copy is a ``CommittingList``/``CommittingSet``
instead, whose mutating methods change it and then commit its whole new
value to the option, as ``m.x = new value`` does (one generation). A
commit the library refuses (a bad value, a read-only handle) undoes the
change to the object and raises; so does a change of a value that a patch
of the calling thread supplies (Segment._committing_copy()). Like any
read-modify-write, a commit by another process between the read and the
change is overwritten.
"""

_LIST_MUTATORS = ("append", "extend", "insert", "remove", "pop", "clear", "sort", "reverse",
                  "__setitem__", "__delitem__", "__iadd__", "__imul__")
_SET_MUTATORS = ("add", "discard", "remove", "pop", "clear", "update", "difference_update",
                 "intersection_update", "symmetric_difference_update", "__ior__", "__iand__",
                 "__isub__", "__ixor__")


def _committing(base, name, refill):
    method = getattr(base, name)

    def mutate(self, *args, **kwargs):
        before = base(self)
        result = method(self, *args, **kwargs)
        try:
            self._shmcfg_commit(self)
        except BaseException:
            refill(self, before)
            raise
        return result
    mutate.__name__ = name
    mutate.__qualname__ = f"{base.__name__}.{name}"
    mutate.__doc__ = f"{base.__name__}.{name}, then commit the new value to the option."
    return mutate


def _refill_list(obj, items):
    list.__setitem__(obj, slice(None), items)


def _refill_set(obj, items):
    set.clear(obj)
    set.update(obj, items)


class CommittingList(list):
    """A list option's value: its in-place changes commit to the option."""

    __slots__ = ("_shmcfg_commit",)

    def __reduce_ex__(self, protocol):
        return (list, (list(self),))  # pickles and copies as a plain list


class CommittingSet(set):
    """A set option's value: its in-place changes commit to the option."""

    __slots__ = ("_shmcfg_commit",)

    def __reduce_ex__(self, protocol):
        return (set, (set(self),))


for _n in _LIST_MUTATORS:
    setattr(CommittingList, _n, _committing(list, _n, _refill_list))
for _n in _SET_MUTATORS:
    setattr(CommittingSet, _n, _committing(set, _n, _refill_set))
del _n


def committing(is_list, commit):
    """A function making a CommittingList (is_list) or CommittingSet of
    items, whose changes call commit(new value)."""
    cls = CommittingList if is_list else CommittingSet

    def make(items):
        p = cls(items)
        p._shmcfg_commit = commit
        return p
    return make
