#!/usr/bin/env python3
"""Minimal reproductions of what bbreplay found wrong in FlagGems' kernels (and one read in its source) on real-model traces (issue 47),
each run against torch on the same values, with no part of bbshim: FlagGems' functions called directly, as
the backend folder of scripts/flaggems_backend.py calls them. Prints one line per finding, "reproduced" or
"not reproduced", and what differed. Needs a CUDA device and flag_gems (scripts/gpu-check flaggems runs it).

    python scripts/flaggems_repro.py
"""
import math
import sys

import torch


def main():
    try:
        import flag_gems
        from flag_gems import ops
    except Exception as e:  # (absent, or a version whose API differs)
        print(f"flaggems_repro: flag_gems cannot be imported: {e}")
        return 77
    if not torch.cuda.is_available():
        print("flaggems_repro: no CUDA device")
        return 77
    print(f"FlagGems {getattr(flag_gems, '__version__', '?')}, torch {torch.__version__}, "
          f"{torch.cuda.get_device_name()}")
    dev = "cuda"
    torch.manual_seed(0)
    found = []

    def report(name, reproduced, detail):
        found.append(reproduced)
        print(f"{'reproduced' if reproduced else 'not reproduced'}: {name}: {detail}")

    def attempt(name, body):
        try:
            body()
        except Exception as e:  # an exception is the finding for some, a failure of the script for others
            report(name, False, f"the reproduction itself raised {type(e).__name__}: {e}")

    # 1. cat drops torch.Size([0]) tensors and returns the one left: the result is the input itself.
    def cat_alias():
        empty, b = torch.empty(0, device=dev), torch.randn(2, 12, 5, 64, device=dev)
        r = ops.cat([empty, b], -2)
        ref = torch.cat([empty, b], -2)
        report("cat([Size([0]) tensor, x], -2) returns x itself (torch.cat returns new memory)",
               r.data_ptr() == b.data_ptr() and ref.data_ptr() != b.data_ptr(),
               f"result at {r.data_ptr():#x}, x at {b.data_ptr():#x}, torch.cat's at {ref.data_ptr():#x}")
    attempt("cat aliasing", cat_alias)

    # 2. fill_ on a strided view writes as if it were contiguous. Layouts: a 1-D slice, and bbreplay's
    # noncontiguous variant (every other element of a buffer twice as wide in the last dimension) in 2-D
    # and 3-D, small and of GPT-2's sizes (its embedding's gradient), float32 and bfloat16. The 1-D slice of
    # 1,536 did not reproduce on an H100 (2026-12-07); the 2-D and 3-D layouts raised IndexError there, so
    # each layout is tried on its own and what it raised is part of the finding.
    def fill_strided():
        shapes = {"x[::2] of 1536": ((1536,), (slice(None, None, 2),)),
                  "x[::2] of 2 x 50257*768": ((2 * 50257 * 768,), (slice(None, None, 2),)),
                  "[768, 768] of a [768, 1536] buffer": ((768, 1536), (slice(None), slice(None, None, 2))),
                  "[50257, 768] of a [50257, 1536] buffer": ((50257, 1536), (slice(None), slice(None, None, 2))),
                  "[8, 512, 768] of an [8, 512, 1536] buffer": ((8, 512, 1536), (Ellipsis, slice(None, None, 2)))}
        details, wrong_any = [], False
        for name, (size, index) in shapes.items():
            for dtype in (torch.float32, torch.bfloat16):
                x = torch.randn(*size, device=dev, dtype=dtype)[index]
                label = f"{name} {str(dtype).replace('torch.', '')}"
                try:
                    ops.fill_scalar_(x, 0.0)
                    torch.cuda.synchronize()
                except Exception as e:  # (torch's fill_ takes every one of these layouts)
                    wrong_any = True
                    details.append(f"{label}: raised {type(e).__name__}: {e}")
                    continue
                wrong = int((x != 0).sum())
                wrong_any |= wrong > 0
                details.append(f"{label}: {wrong} of {x.numel()} not 0")
        report("fill_ on a strided tensor leaves elements unfilled or raises", wrong_any, "; ".join(details))
    attempt("fill_ strided", fill_strided)

    # 3. index_select reads a non-contiguous index as if it were contiguous.
    def index_select_strided():
        w = torch.randn(1024, 768, device=dev)
        idx = torch.randint(0, 1024, (1024,), device=dev)[::2]
        r, ref = ops.index_select(w, 0, idx), torch.index_select(w, 0, idx)
        rows = int((r != ref).any(dim=1).sum())
        report("index_select(w, 0, idx[::2]) selects wrong rows", rows > 0, f"{rows} of {ref.shape[0]} rows differ")
    attempt("index_select strided index", index_select_strided)

    # 4. mm refuses an operand whose stride is not a multiple of 16 bytes (GPT-2's vocabulary, 50257). The
    # LM head's three products in bfloat16 (4096 tokens, hidden 768): the weight's gradient (a transposed
    # [4096, 50257] operand), the input's gradient (a [4096, 50257] operand whose rows are 100,514 bytes
    # apart), the forward (a transposed weight); the first alone ran on an H100, 2026-12-07.
    def mm_unaligned():
        bf = dict(device=dev, dtype=torch.bfloat16)
        products = {"[4096, 50257].t() @ [4096, 768]": (torch.randn(4096, 50257, **bf).t(), torch.randn(4096, 768, **bf)),
                    "[4096, 50257] @ [50257, 768]": (torch.randn(4096, 50257, **bf), torch.randn(50257, 768, **bf)),
                    "[4096, 768] @ [50257, 768].t()": (torch.randn(4096, 768, **bf), torch.randn(50257, 768, **bf).t())}
        details, raised = [], False
        for name, (a, b) in products.items():
            torch.mm(a, b)
            try:
                ops.mm(a, b)
                details.append(f"{name}: ran")
            except Exception as e:
                raised = True
                details.append(f"{name}: {type(e).__name__}: {str(e)[:200]}")
        report("mm on GPT-2's LM-head operands (rows not 16-byte aligned) raises", raised, "; ".join(details))
    attempt("mm unaligned stride", mm_unaligned)

    # 5. log_softmax of a row holding a NaN: torch's row is all NaN, FlagGems' only at the NaN.
    def log_softmax_nan():
        x = torch.randn(4, 50257, device=dev)
        x[0, 0] = math.nan
        r, ref = ops.log_softmax(x, 1), torch.log_softmax(x, 1)
        finite = int(torch.isfinite(r[0]).sum())
        report("log_softmax of a row holding one NaN keeps the row's other elements finite",
               finite > 0 and not bool(torch.isfinite(ref[0]).any()),
               f"{finite} of {x.shape[1]} elements finite; torch's: {int(torch.isfinite(ref[0]).sum())}")
    attempt("log_softmax NaN", log_softmax_nan)

    # 6. log_softmax of an empty tensor.
    def log_softmax_empty():
        x = torch.randn(0, 50257, device=dev)
        torch.log_softmax(x, 1)
        try:
            ops.log_softmax(x, 1)
            report("log_softmax of a [0, 50257] tensor raises", False, "it ran")
        except Exception as e:
            report("log_softmax of a [0, 50257] tensor raises", True, f"{type(e).__name__}: {e}")
    attempt("log_softmax empty", log_softmax_empty)

    # 7. nll_loss_backward on a row whose target is ignore_index: its kernel stores the row's value (0) at
    # row * C + ignore_index under the row mask alone (flag_gems/ops/nllloss.py), into the row before, and
    # for row 0 before the gradient's memory. Read in the source, 2026-12-07. The public function allocates
    # the gradient itself, so the kernel is launched here as that function launches it, on a gradient that
    # is a view 256 elements into a larger buffer: what lies before it shows a write there.
    def nll_loss_backward_ignored():
        import triton
        from flag_gems.ops import nllloss
        n, c = 64, 1000
        logp = torch.log_softmax(torch.randn(n, c, device=dev), 1)
        target = torch.randint(0, c, (n,), device=dev)
        target[0] = -100        # row 0 ignored: a store before the gradient
        target[9] = c - 100     # row 9 targets column c - 100 ...
        target[10] = -100       # ... and row 10, ignored, stores a zero there
        grad_out = torch.ones((), device=dev)
        total = (target != -100).sum().to(torch.float32)
        buf = torch.full((256 + n * c,), 7.0, device=dev)
        grad = buf[256:].view(n, c).zero_()
        nllloss.nll_loss_backward_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_N"]),)](
            grad_out, target, None, grad, -100, total, n, c, 1)
        ref = torch.ops.aten.nll_loss_backward(grad_out, logp, target, None, 1, -100, total)
        before = int((buf[:256] != 7.0).sum())
        differ = int((grad != ref).sum())
        report("nll_loss_backward writes an ignored row's zero outside that row", before > 0 or differ > 0,
               f"{before} of the 256 elements before the gradient changed; {differ} gradient elements differ "
               f"from torch's (row 9, column {c - 100}: {grad[9, c - 100].item():.4g}, torch's "
               f"{ref[9, c - 100].item():.4g})")
    attempt("nll_loss_backward ignored", nll_loss_backward_ignored)

    print(f"{sum(found)} of {len(found)} reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
