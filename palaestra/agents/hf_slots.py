"""A KV cache of fixed slots, so that the HF agent's decode steps keep a few fixed shapes.

Each running request owns a slot: a row of key and value buffers of ``slots x heads x width x
head size`` per layer, written from column 0 at the request's own positions. A decode step
writes every slot's new key and value at that slot's next column and attends over the whole
width, under an additive mask that hides the columns a slot does not use. So the attention
shapes of a step depend only on the number of slots (a power of two that only grows) and the
width (which grows in steps of :data:`WIDTH_STEP`), not on which requests run: a request that
joins is copied into a free slot, one that finishes frees its slot.

Why: attention backends that plan per shape (cuDNN's scaled-dot-product attention on sm90, the
default there, builds an execution plan on the host for every new combination of query, key,
value and mask sizes, tens of milliseconds each, and keeps it per thread) pay that cost on
almost every step of a decode whose batch and key length change with each arrival and exit.
"""

from __future__ import annotations

from typing import Any

WIDTH_STEP = 64
"""The width of the buffers (and the length of a bucketed prefill) is a multiple of this."""


def bucket_rows(count: int) -> int:
    """The power of two that holds ``count`` rows (1, 2, 4, ...)."""
    return 1 << max(count - 1, 0).bit_length()


def bucket_width(columns: int) -> int:
    """``columns`` rounded up to a multiple of :data:`WIDTH_STEP`."""
    return -(-columns // WIDTH_STEP) * WIDTH_STEP


class SlotCache:
    """Key and value buffers of fixed slots (see the module docstring), passed to the model's
    forward as its cache: ``update`` writes a decode step's keys at each slot's column.

    ``place`` copies a prefill's rows into free slots, ``free`` releases slots, ``reserve``
    grows the buffers, ``step_inputs`` gives a step's mask and positions and ``advance`` moves
    the occupied slots to their next column after it.
    """

    def __init__(self, layers: int) -> None:
        self.keys: list[Any] = [None] * layers
        self.values: list[Any] = [None] * layers
        self.mask: Any = None  # slots x width, additive: 0 where a slot attends, else the minimum
        self.columns: Any = None  # slots: the column (= the position) each slot writes next
        self.occupied: Any = None  # slots: 1 where a request runs, else 0
        self.free_slots: list[int] = []
        self.slots = self.width = 0

    # -- what the model's forward calls ------------------------------------------------------

    def update(self, keys: Any, values: Any, layer_idx: int, *args: Any, **kwargs: Any) -> Any:
        """Write one step's ``keys`` and ``values`` (slots x heads x 1 x size) of layer
        ``layer_idx`` at each slot's column; the layer's whole buffers."""
        index = self.columns.view(-1, 1, 1, 1).expand(-1, keys.shape[1], 1, keys.shape[3])
        self.keys[layer_idx].scatter_(2, index, keys)
        self.values[layer_idx].scatter_(2, index, values)
        return self.keys[layer_idx], self.values[layer_idx]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.width

    # -- slots --------------------------------------------------------------------------------

    def reserve(self, slots: int, width: int, like: Any = None) -> None:
        """Grow to at least ``slots`` slots and ``width`` columns (rounded up to a power of two
        and a multiple of :data:`WIDTH_STEP`); ``like`` (a layer's prefill keys) gives the
        heads, size, dtype and device of empty buffers."""
        import torch

        slots, width = max(bucket_rows(slots), self.slots), max(bucket_width(width), self.width)
        if (slots, width) == (self.slots, self.width):
            return
        reference = self.keys[0] if self.keys[0] is not None else like
        heads, size = reference.shape[1], reference.shape[3]
        empty = reference.new_zeros((slots, heads, width, size))
        for buffers in (self.keys, self.values):
            for layer, old in enumerate(buffers):
                buffers[layer] = _copied_into(empty.clone(), old)
        hidden = torch.finfo(reference.dtype).min
        self.mask = _copied_into(reference.new_full((slots, width), hidden), self.mask)
        zeros = torch.zeros(slots, dtype=torch.long, device=reference.device)
        self.columns = _copied_into(zeros.clone(), self.columns)
        self.occupied = _copied_into(zeros, self.occupied)
        self.free_slots += range(self.slots, slots)
        self.slots, self.width = slots, width

    def place(self, layers: list[tuple[Any, Any]], lengths: list[int]) -> list[int]:
        """Copy the first ``len(lengths)`` rows of a left-padded prefill's cache (``layers``:
        keys and values, rows x heads x columns x size) into free slots, row ``i`` holding
        ``lengths[i]`` positions; the slots, in row order. Call ``reserve`` first."""
        import torch

        count, columns = len(lengths), layers[0][0].shape[2]
        slots, self.free_slots = self.free_slots[:count], self.free_slots[count:]
        device = self.mask.device
        index = torch.tensor(slots, device=device)
        length = torch.tensor(lengths, device=device)
        # slot column j takes the prefill's column (columns - length + j): left-aligned
        source = (torch.arange(columns, device=device) + (columns - length)[:, None]).clamp(
            max=columns - 1
        )
        for layer, (keys, values) in enumerate(layers):
            gather = source[:, None, :, None].expand(-1, keys.shape[1], -1, keys.shape[3])
            self.keys[layer][index, :, :columns] = keys[:count].gather(2, gather)
            self.values[layer][index, :, :columns] = values[:count].gather(2, gather)
        used = torch.arange(self.width, device=device) < length[:, None]
        self.mask[index] = torch.where(used, 0.0, torch.finfo(self.mask.dtype).min).to(
            self.mask.dtype
        )
        self.columns[index] = length
        self.occupied[index] = 1
        return slots

    def free(self, slots: list[int]) -> None:
        """Release ``slots``: they no longer advance and take the next requests that join."""
        index = self.columns.new_tensor(slots)
        self.columns[index] = 0
        self.occupied[index] = 0
        self.free_slots = sorted(self.free_slots + slots)

    # -- a decode step ------------------------------------------------------------------------

    def step_inputs(self) -> tuple[Any, Any]:
        """A step's attention mask (slots x 1 x 1 x width) and positions (slots x 1), with
        each slot's column about to be written unmasked."""
        self.mask.scatter_(1, self.columns[:, None], 0.0)
        return self.mask[:, None, None, :], self.columns[:, None]

    def advance(self) -> None:
        """Move the occupied slots to their next column (after a step)."""
        self.columns += self.occupied


def _copied_into(new: Any, old: Any) -> Any:
    """``new`` with ``old`` (None, or no larger along every axis) copied into its leading
    corner."""
    if old is not None:
        new[tuple(slice(0, n) for n in old.shape)] = old
    return new
