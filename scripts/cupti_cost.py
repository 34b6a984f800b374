#!/usr/bin/env python3
"""What CUPTI itself costs a tiny CUDA op, measured inside one process.

Between processes this host's per-op time moves by more than the costs being measured (a no-preload
run read 6.6 to 10.6 us/op in one benchmark), so this script compares states of CUPTI within one
process, cycling through them --cycles times (each state timed for --seconds per cycle):

  detached       no CUPTI attached (before the first CUPTI call, and after each cuptiFinalize)
  recording      CUPTI attached, kernel/memcpy/memset records enabled (what bbshim's device timing
                 pays at least; it adds its launch callback and the op bookkeeping)
  attached-idle  CUPTI attached, every record disabled again (what sampled timing pays between
                 windows if it only disables records)
  profiler       torch.profiler(activities=CPU+CUDA, record_shapes=True) around the loop (last, after
                 the other cycles, alternating with no profiler)

CUPTI is driven through ctypes on the libcupti that torch loaded, with Python buffer callbacks;
nothing of bbshim is involved (run it without LD_PRELOAD). Also prints how long attaching
(register + enable) and detaching (flush + cuptiFinalize) take.

    python3 scripts/cupti_cost.py [--cycles 8] [--seconds 0.3]
"""
import argparse
import ctypes
import glob
import os
import statistics
import time

import torch

from bench_overhead import add_loop_us  # the same loop as the overhead benchmark's

CONCURRENT_KERNEL, MEMCPY, MEMSET = 10, 1, 2  # CUpti_ActivityKind values (cupti_activity.h)
KINDS = (CONCURRENT_KERNEL, MEMCPY, MEMSET)
BUFFER_BYTES = 32 << 20


def load_cupti():
    with open("/proc/self/maps") as f:
        loaded = [l.split()[-1] for l in f if "libcupti.so" in l]
    candidates = loaded + glob.glob(os.path.join(os.path.dirname(torch.__file__), "..", "nvidia", "*", "lib",
                                                 "libcupti.so*"))
    for path in candidates + ["libcupti.so.13", "libcupti.so"]:
        try:
            return ctypes.CDLL(path), path
        except OSError:
            continue
    raise SystemExit("no libcupti found")


class Cupti:
    REQ = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.POINTER(ctypes.c_uint8)), ctypes.POINTER(ctypes.c_size_t),
                           ctypes.POINTER(ctypes.c_size_t))
    DONE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint32, ctypes.POINTER(ctypes.c_uint8), ctypes.c_size_t,
                            ctypes.c_size_t)

    def __init__(self):
        self.lib, self.path = load_cupti()
        self.buffers = {}
        self.records = 0
        self.bytes = 0
        self._req = self.REQ(self._request)  # kept alive: CUPTI holds the pointers
        self._done = self.DONE(self._complete)

    def _request(self, buf, size, max_records):
        b = (ctypes.c_uint8 * BUFFER_BYTES)()
        addr = ctypes.addressof(b)
        self.buffers[addr] = b
        buf[0] = ctypes.cast(b, ctypes.POINTER(ctypes.c_uint8))
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def _complete(self, ctx, stream, buf, size, valid):
        addr = ctypes.addressof(buf.contents)
        rec = ctypes.c_void_p()
        while self.lib.cuptiActivityGetNextRecord(buf, ctypes.c_size_t(valid), ctypes.byref(rec)) == 0:
            self.records += 1
        self.bytes += valid
        self.buffers.pop(addr, None)

    def check(self, what, r):
        if r != 0:
            raise SystemExit(f"{what} failed: CUPTI error {r}")

    def attach(self):
        self.check("cuptiActivityRegisterCallbacks", self.lib.cuptiActivityRegisterCallbacks(self._req, self._done))
        self.record(True)

    def record(self, on):
        for k in KINDS:
            self.check("cuptiActivityEnable" if on else "cuptiActivityDisable",
                       (self.lib.cuptiActivityEnable if on else self.lib.cuptiActivityDisable)(k))

    def detach(self):
        # cuptiFinalize is safe outside an API callback once the device is idle and buffers are flushed.
        torch.cuda.synchronize()
        self.check("cuptiActivityFlushAll", self.lib.cuptiActivityFlushAll(1))
        self.check("cuptiFinalize", self.lib.cuptiFinalize())


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cycles", type=int, default=8)
    p.add_argument("--seconds", type=float, default=0.3, help="loop time per state per cycle")
    args = p.parse_args()
    a = torch.ones(1, device="cuda")
    b = torch.ones(1, device="cuda")
    add_loop_us(a, b, 0.5)  # warm
    cupti = Cupti()
    t = {k: [] for k in ("detached", "recording", "attached-idle", "none", "profiler")}
    attach_ms, detach_ms = [], []
    for _ in range(args.cycles):
        t["detached"].append(add_loop_us(a, b, args.seconds))
        t0 = time.perf_counter()
        cupti.attach()
        attach_ms.append((time.perf_counter() - t0) * 1e3)
        t["recording"].append(add_loop_us(a, b, args.seconds))
        cupti.record(False)
        t["attached-idle"].append(add_loop_us(a, b, args.seconds))
        t0 = time.perf_counter()
        cupti.detach()
        detach_ms.append((time.perf_counter() - t0) * 1e3)
    from torch.profiler import ProfilerActivity, profile
    for _ in range(args.cycles):
        t["none"].append(add_loop_us(a, b, args.seconds))
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], record_shapes=True):
            t["profiler"].append(add_loop_us(a, b, args.seconds))
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {cupti.path}; date {time.strftime('%Y-%m-%d')}")
    print(f"torch.add on 1-element CUDA tensors, {args.cycles} cycles x {args.seconds} s per state; "
          f"CUPTI records collected: {cupti.records} ({cupti.bytes >> 20} MiB)")
    print(f"{'state':<15}{'median us/op':>14}{'min':>8}{'max':>8}{'median delta':>14}")
    for state, base in (("detached", None), ("recording", "detached"), ("attached-idle", "detached"),
                        ("none", None), ("profiler", "none")):
        xs = t[state]
        delta = f"{statistics.median(x - y for x, y in zip(xs, t[base])):+.2f}" if base else ""
        print(f"{state:<15}{statistics.median(xs):>14.2f}{min(xs):>8.2f}{max(xs):>8.2f}{delta:>14}")
    print(f"attach (register + enable): median {statistics.median(attach_ms):.2f} ms, max {max(attach_ms):.2f}; "
          f"detach (sync + flush + cuptiFinalize): median {statistics.median(detach_ms):.2f} ms, "
          f"max {max(detach_ms):.2f}")


if __name__ == "__main__":
    main()
