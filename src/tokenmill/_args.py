"""Arguments the public calls share, checked in one place: thread counts (a caller's
``num_threads`` and ``TOKENMILL_NUM_THREADS``), integer arguments in a range, and a batch that is
one string."""

from __future__ import annotations

import operator
import os

from tokenmill.errors import InputError

# More threads than this are never started, whatever is asked (each is a native thread).
MAX_THREADS = 1 << 12


def integer_in(value: object, low: int, high: int | None = None) -> int | None:
    """``value`` as an int if it is an integer (an int or any object with ``__index__``, as a
    numpy integer; not a bool) in [low, high) (high None: no bound); else None."""
    if isinstance(value, bool):
        return None
    try:
        n = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None
    return n if low <= n and (high is None or n < high) else None


def checked_threads(asked: int | None) -> int | None:
    """A caller's ``num_threads``, checked: None, or a positive integer; InputError otherwise."""
    if asked is None:
        return None
    n = integer_in(asked, 1)
    if n is None:
        raise InputError(f"num_threads must be a positive number of threads (or None: "
                         f"TOKENMILL_NUM_THREADS, else every core this process may use), got "
                         f"{asked!r}")
    return n


def thread_count(texts: int | None = None, asked: int | None = None) -> int:
    """Threads the core uses for a batch of ``texts`` (None: a stream of batches): ``asked``
    (a caller's ``num_threads``) if given, else TOKENMILL_NUM_THREADS, else the cores this
    process may run on; 1 for fewer than two texts (texts are never split across threads, and
    asking the scheduler costs more than counting a sentence's tokens); never more than the
    texts, nor than MAX_THREADS. InputError for an ``asked`` or a TOKENMILL_NUM_THREADS that is
    not a positive count (the variable is checked for every batch, whatever its size)."""
    chosen = checked_threads(asked)
    if chosen is None:
        env = os.environ.get("TOKENMILL_NUM_THREADS", "").strip()
        if env:
            if not (env.isascii() and env.isdigit()) or int(env) < 1:
                raise InputError(f"TOKENMILL_NUM_THREADS must be a positive number of threads, "
                                 f"got {env!r}")
            chosen = int(env)
        elif texts is not None and texts < 2:
            return 1
        else:
            chosen = (len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                      else os.cpu_count() or 1)
    if texts is not None:
        chosen = min(chosen, max(texts, 1))
    return min(chosen, MAX_THREADS)


def refuse_one_text(batch: object, name: str, holds: str, single_call: str) -> None:
    """InputError when ``batch`` (the argument ``name``, a batch that ``holds`` its items) is
    one str or bytes, whose characters would each be taken for an item."""
    if isinstance(batch, (str, bytes)):
        raise InputError(f"{name}: expected a batch ({holds}), got one {type(batch).__name__}; "
                         f"encode a single {'text' if name == 'texts' else 'input'} with "
                         f"{single_call}")
