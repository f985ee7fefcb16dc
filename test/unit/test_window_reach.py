"""`shape_rules.window_reach`, the one formula of how far a windowed op reads
along a spatial axis (the ONNX front end's auto_pad, the padded tensors
written in place, the lowering's window raising all use it)."""

from __future__ import annotations

import itertools

from nem.dialect.shape_rules import window_reach


def test_the_reach_is_one_past_the_last_element_a_window_reads():
    """Against the windows enumerated: window o reads o * stride + j * dilation."""
    for out, stride, kernel, dilation in itertools.product(
        range(1, 6), range(1, 4), range(1, 5), range(1, 4)
    ):
        last = max(o * stride + j * dilation for o in range(out) for j in range(kernel))
        assert window_reach(out, stride, kernel, dilation) == last + 1


def test_examples():
    assert window_reach(16, 2, 3, 1) == 33  # a 3x3 stride-2 conv over 32 padded to 34
    assert window_reach(8, 2, 3, 1) == 17  # its 3x3 stride-2 pool over 16 padded to 18
    assert window_reach(4, 1, 3, 2) == 8  # dilated
