"""A replica's KV cache allocator: blocks of ``block_size`` tokens, allocated chunk by chunk.

vLLM's paged KV cache without prefix caching or watermark: a request holds
``ceil(computed tokens / block_size)`` blocks; a prompt chunk allocates the blocks its tokens spill
into; a decoding sequence needs a new block on the step whose token starts one. The allocator also
counts the decoding sequences by *block phase* (where in its block each one's next token falls), so
that it can say, without visiting them, how many blocks the next k decode steps allocate and how
many steps fit in the free blocks (the replica's pure-decode windows, ``hetinfra.sim.replica``).

A different cache (prefix caching, a watermark, an adapter's slots taken out of it) is a subclass
with the same methods; the compiled core (``hetinfra.sim.core``) runs only this one.
"""

from __future__ import annotations

__all__ = ["KVBlocks"]


class KVBlocks:
    """``total`` blocks of ``bs`` tokens; ``used`` held; ``phase[p]``: decoding sequences whose
    first decode token's position (their ``xb``, see ``Replica``) is p modulo the block size."""

    __slots__ = ("total", "bs", "used", "phase")

    def __init__(self, total: int, bs: int):
        self.total, self.bs, self.used = total, bs, 0
        self.phase = [0] * bs

    def blocks_for(self, tokens: int) -> int:
        """Blocks that ``tokens`` computed tokens occupy."""
        return -(-tokens // self.bs)

    def free(self) -> int:
        return self.total - self.used

    # ---- the decoding sequences, by block phase -----------------------------------------------
    def track(self, xb: int) -> None:
        self.phase[xb % self.bs] += 1

    def untrack(self, xb: int) -> None:
        self.phase[xb % self.bs] -= 1

    def next_step_blocks(self, clock: int) -> int:
        """Blocks the decoding sequences allocate on the decode step at ``clock``."""
        return self.phase[(-clock) % self.bs]

    def decode_blocks(self, clock: int, nd: int, k: int) -> int:
        """Blocks ``nd`` decoding sequences allocate over their next k steps from ``clock``."""
        if not nd or k <= 0:
            return 0
        bs, ph = self.bs, self.phase
        full, r = divmod(k, bs)
        return full * nd + sum(ph[(-(clock + j)) % bs] for j in range(r))

    def decode_steps_fitting(self, clock: int, nd: int, free: int) -> int:
        """Largest k whose decode steps (``nd`` sequences from ``clock``) fit in ``free`` blocks."""
        if not nd:
            return 1 << 60
        bs, ph = self.bs, self.phase
        q, rem = divmod(free, nd)
        r, acc = 0, 0
        while r < bs - 1:
            acc += ph[(-(clock + r)) % bs]
            if acc > rem:
                break
            r += 1
        return q * bs + r
