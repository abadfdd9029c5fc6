"""A dense layer's sums as explicit vectors: the inner loop of the policy forward (`forward_row`).

Each output of a layer is a chain of `fan_in` additions that must stay in input order (the
same bits on every machine), so the outputs are what runs side by side: one pass over the
inputs keeps many outputs' sums in vector registers until it stores them. numba's loop
vectoriser does not do that (it reloads and stores the sums for every few inputs, and runs
the outputs past its vector width one by one), so `_tile` writes the pass in LLVM IR
itself: one vector accumulator per group of outputs, `acc + x_i * w_i` lane by lane from
0.0, IEEE single precision with no fast-math flag (no fused multiply-add, no
reassociation). Each lane does exactly what the scalar sum does, so the vector width of the
CPU (AVX-512, AVX2, NEON, which LLVM lowers the wide vectors to) never changes a number
(tests/test_evaluation.py).

The functions that use this pass (`forward_row`, the evaluator's row loop) carry a compiled
copy of it in numba's cache, which numba keys on their own files only; `envs.compiled_cache`
drops the package's cache when this file changes.
"""

from __future__ import annotations

from typing import Any

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic


@intrinsic
def _tile(
    typingctx: Any, w: Any, base: Any, stride: Any, h: Any, fan_in: Any, acc: Any, first: Any, widths: Any
) -> Any:
    """`acc[first + j] = sum over i < fan_in of h[i] * w[base + i * stride + j]` (float32, in
    input order from 0.0) for j below sum(widths), in one pass over the inputs with one vector
    per entry of `widths` (a tuple of literal ints)."""
    if not isinstance(widths, types.BaseTuple) or not all(isinstance(t, types.IntegerLiteral) for t in widths):
        return None  # numba retries with the literal tuple
    for array in (w, h, acc):  # the pass reads and writes through the arrays' data pointers
        if not (
            isinstance(array, types.Array) and array.ndim == 1 and array.layout == "C" and array.dtype == types.float32
        ):
            raise TypeError(f"dense layers take 1-D C-contiguous float32 arrays, got {array}")
    lanes = [t.literal_value for t in widths]
    starts = np.cumsum([0, *lanes[:-1]]).tolist()
    signature = types.void(w, base, stride, h, fan_in, acc, first, widths)

    def codegen(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        w_arr, base_v, stride_v, h_arr, n, acc_arr, first_v = args[:7]
        i64, i32 = ir.IntType(64), ir.IntType(32)
        vectors = [ir.VectorType(ir.FloatType(), k) for k in lanes]
        zeros = [ir.Constant(v, [0.0] * v.count) for v in vectors]
        w_ptr = context.make_array(sig.args[0])(context, builder, w_arr).data
        h_ptr = context.make_array(sig.args[3])(context, builder, h_arr).data
        acc_ptr = context.make_array(sig.args[5])(context, builder, acc_arr).data

        entry = builder.basic_block
        loop = builder.append_basic_block("tile.loop")
        done = builder.append_basic_block("tile.done")
        builder.cbranch(builder.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)

        builder.position_at_end(loop)
        i = builder.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        sums = [builder.phi(v) for v in vectors]
        for s, z in zip(sums, zeros):
            s.add_incoming(z, entry)
        x = builder.load(builder.gep(h_ptr, [i]))
        row = builder.add(base_v, builder.mul(i, stride_v))
        added = []
        for v, s, start in zip(vectors, sums, starts):
            xs = builder.insert_element(ir.Constant(v, ir.Undefined), x, ir.Constant(i32, 0))
            xs = builder.shuffle_vector(
                xs, ir.Constant(v, ir.Undefined), ir.Constant(ir.VectorType(i32, v.count), [0] * v.count)
            )
            at = builder.gep(w_ptr, [builder.add(row, ir.Constant(i64, start))])
            ws = builder.load(builder.bitcast(at, v.as_pointer()), align=4)
            added.append(builder.fadd(s, builder.fmul(xs, ws)))
        last = builder.basic_block
        following = builder.add(i, ir.Constant(i64, 1))
        i.add_incoming(following, last)
        for s, a in zip(sums, added):
            s.add_incoming(a, last)
        builder.cbranch(builder.icmp_signed("<", following, n), loop, done)

        builder.position_at_end(done)
        results = []
        for z, a in zip(zeros, added):
            result = builder.phi(z.type)
            result.add_incoming(z, entry)
            result.add_incoming(a, last)
            results.append(result)
        for result, v, start in zip(results, vectors, starts):
            at = builder.gep(acc_ptr, [builder.add(first_v, ir.Constant(i64, start))])
            builder.store(result, builder.bitcast(at, v.as_pointer()), align=4)
        return context.get_dummy_value()

    return signature, codegen


@numba.njit(cache=True, inline="always")
def dense(w: np.ndarray, offset: int, fan_in: int, fan_out: int, h: np.ndarray, acc: np.ndarray) -> None:
    """`acc[:fan_out]` = h[:fan_in] @ W, W the (fan_in, fan_out) row-major matrix at w[offset:].

    The outputs go in passes of up to 64 (four 16-lane vectors); a layer of up to 64 outputs
    whose width is a multiple of 8 (the policies' usual 40, 64, ...) takes one pass.
    """
    j = 0
    while fan_out - j >= 64:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 16, 16, 16))
        j += 64
    left = fan_out - j  # under 64: the rest in one pass of 16s and an 8, whichever fit
    if left >= 56:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 16, 16, 8))
    elif left >= 48:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 16, 16))
    elif left >= 40:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 16, 8))
    elif left >= 32:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 16))
    elif left >= 24:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16, 8))
    elif left >= 16:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (16,))
    elif left >= 8:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (8,))
    j += left - left % 8
    left = fan_out - j
    if left >= 4:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (4,))
        j, left = j + 4, left - 4
    if left == 3:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (2, 1))
    elif left == 2:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (2,))
    elif left == 1:
        _tile(w, offset + j, fan_out, h, fan_in, acc, j, (1,))
