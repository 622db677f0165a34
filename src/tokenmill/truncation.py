"""Truncation of one input or a pair, and the overflowing windows of what is cut, laid out
exactly as Hugging Face ``tokenizers`` lays them out."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from tokenmill.encoding import Encoding, Truncation
from tokenmill.errors import InputError

# What lays out the inputs (a post-processor's process, or a plain concatenation), told which
# of them is an overflowing window.
Process = Callable[[Encoding, Encoding | None, tuple[bool, bool]], Encoding]


def truncate(a: Encoding, b: Encoding | None, truncation: Truncation,
             added: int) -> tuple[Encoding, Encoding | None]:
    """``a`` and ``b`` cut to fit ``truncation.max_length`` with the ``added`` special tokens;
    each keeps what was cut in its ``overflowing`` windows (``stride`` tokens of overlap).

    The pair is cut by ``truncation.strategy``: "LongestFirst" takes from the longer input
    until it is as short as the other, then shares the room (the longer gets the odd token);
    "OnlyFirst"/"OnlySecond" take everything from one input.
    """
    room = truncation.max_length - added
    if room < 0:
        raise InputError(f"truncation max_length {truncation.max_length} leaves no room for "
                         f"the {added} special tokens the template adds")
    if room == 0:  # everything overflows, in one window per input (as in tokenizers)
        return a.truncated(0), b.truncated(0) if b is not None else None
    total = len(a) + (len(b) if b is not None else 0)
    if total <= room:
        return a, b
    cut = total - room

    def cut_to(e: Encoding, n: int, which: str) -> Encoding:
        if 0 < n <= truncation.stride and len(e) > n:
            share = ", shared by the pair" if b is not None else ""
            raise InputError(
                f"truncation stride {truncation.stride} must be smaller than the {n} tokens "
                f"{which} is cut to (max_length {truncation.max_length} less {added} special "
                f"tokens{share})")
        return e.truncated(n, truncation.stride, truncation.side)

    if truncation.strategy == "LongestFirst":
        if b is None:
            return cut_to(a, room, "the input"), None
        short, long = sorted((len(a), len(b)))
        # The longer input shrinks to the shorter one's length or to what the shorter one
        # leaves; if both are still too long, they share the room.
        n_short, n_long = short, max(short, room - short)
        if n_short + n_long > room:
            n_short, n_long = room // 2, room - room // 2
        na, nb = (n_short, n_long) if len(a) <= len(b) else (n_long, n_short)
        return cut_to(a, na, "the first input"), cut_to(b, nb, "the second input")
    first = truncation.strategy == "OnlyFirst"
    if not first and b is None:
        raise InputError(f"truncation strategy 'OnlySecond' cuts the second input, but only one "
                         f"input was given and it is {cut} tokens too long")
    target = a if first else cast(Encoding, b)  # OnlySecond with no pair is refused above
    which = "the first input" if first else "the second input"
    if len(target) <= cut:
        raise InputError(
            f"truncation strategy {truncation.strategy!r}: {which} has {len(target)} tokens, "
            f"too few to remove the {cut} needed to fit max_length {truncation.max_length}")
    kept = cut_to(target, len(target) - cut, which)
    return (kept, b) if first else (a, kept)


def combine(a: Encoding, b: Encoding | None, process: Process, a_first: bool = True) -> Encoding:
    """``process(a, b, (False, False))`` with every window combination in ``overflowing``, as
    tokenizers nests them; ``process``'s third argument says which of its inputs is a later
    window (which keeps its encoded type ids), ``a_first`` whether the pair template names
    ``a``'s input first.

    tokenizers merges the template's parts left to right, and each merge pairs every window
    of one side with every window of the other. With X the input the template names first
    and Y the other, windows X0..Xn and Y0..Ym, the result is (X0, Y0) and overflows: for each
    i >= 1, (Xi, Y0) holding (Xi, Y1..Ym), then (Xi, Y1..Ym) themselves; then for each
    j >= 1, (X0, Yj) holding (X1..Xn, Yj).
    """
    wa = [a, *(a._overflowing or ())]
    if b is None:
        out = process(a, None, (False, False))
        out._overflowing = [process(w, None, (True, False)) for w in wa[1:]] or None
        return out
    wb = [b, *(b._overflowing or ())]
    wx, wy = (wa, wb) if a_first else (wb, wa)

    def pair(i: int, j: int) -> Encoding:
        ia, ib = (i, j) if a_first else (j, i)
        return process(wa[ia], wb[ib], (ia > 0, ib > 0))

    n, m = len(wx), len(wy)
    overflowing = []
    for i in range(1, n):
        head = pair(i, 0)
        # (the same windows twice, as tokenizers lists them: nested and after their head)
        rest = [pair(i, j) for j in range(1, m)]
        head._overflowing = rest or None  # (None: the list made when asked for)
        overflowing += [head, *rest]
    for j in range(1, m):
        head = pair(0, j)
        head._overflowing = [pair(i, j) for i in range(1, n)] or None
        overflowing.append(head)
    out = pair(0, 0)
    out._overflowing = overflowing or None
    return out
