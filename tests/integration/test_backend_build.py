"""bbbackend builds and checks backend folders ahead of time; the CUDA sample backend compiles
wherever nvcc and a CUDA build of torch are (it runs on the GPU host: tests/integration/test_cuda.py)."""
import os
import shutil
import tempfile
import unittest
from pathlib import Path

from support import BUILD, ROOT, TempDirTest, base_env, run

BBBACKEND = BUILD / "bin" / "bbbackend"
RELU = ROOT / "backends" / "cpu_reference" / "relu__default" / "relu.cpp"
# Time limits: a compile of a kernel against torch's headers takes 10-30 s of CPU (nvcc the more), and a
# loaded 2-core CI machine has little to spare; ctest's TIMEOUT for this file (tests/CMakeLists.txt) is
# larger than any one of these.
BUILD_TIMEOUT = 900
CUDA_BUILD_TIMEOUT = 1500


def nvcc_available():
    import torch
    return torch.version.cuda is not None and bool(
        shutil.which("nvcc") or os.environ.get("BB_NVCC") or os.path.exists("/usr/local/cuda/bin/nvcc"))


def cuda_build():
    """Whether the build has its CUDA parts (ctest passes CMake's BB_WITH_CUDA): then the CUDA sample
    backend must compile here, and a missing nvcc is a failure, not a skip."""
    return os.environ.get("BB_WITH_CUDA") == "ON"


def build_env(**extra):
    """base_env() keeps BB_JOBS out; the caller's BB_JOBS (parallel compiles) still applies here."""
    env = dict(base_env(), **{k: str(v) for k, v in extra.items()})
    if os.environ.get("BB_JOBS"):
        env["BB_JOBS"] = os.environ["BB_JOBS"]
    return env


def entries(cache):
    return sorted(p for p in cache.iterdir() if not p.name.startswith("."))


class BackendBuild(TempDirTest):
    @classmethod
    def setUpClass(cls):
        # One compile of a one-kernel backend (relu.cpp), in a cache of its own, shared by the cache and
        # prebuilt tests: each would otherwise compile the same source again.
        cls.shared = Path(tempfile.mkdtemp(prefix="bbshim-bb-"))
        src = cls.shared / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(RELU, src)
        r = run([BBBACKEND, "build", cls.shared / "be"], build_env(BB_CACHE=cls.shared / "cache"),
                timeout=BUILD_TIMEOUT)
        assert r.returncode == 0, r.stdout + r.stderr
        (cls.relu_entry,) = entries(cls.shared / "cache")
        assert (cls.relu_entry / "kernel.so").is_file(), list(cls.relu_entry.iterdir())

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.shared, ignore_errors=True)

    def test_cpu_reference_builds_and_every_kernel_is_usable(self):
        r = run([BBBACKEND, "build", ROOT / "backends" / "cpu_reference"], build_env(), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("9 kernels usable, 0 problems", r.stdout)
        self.assertIn("ok       aten::native_layer_norm", r.stdout)

    def test_a_broken_backend_exits_1_and_lists_each_problem(self):
        r = run([BBBACKEND, "build", ROOT / "tests" / "backends" / "broken"], build_env(), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 1)
        self.assertIn("1 kernels usable, 5 problems", r.stdout)

    def test_cache_is_reused(self):
        cache = self.dir / "cache"
        shutil.copytree(self.shared / "cache", cache)  # holds the one entry setUpClass compiled
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(RELU, src)
        (entry,) = entries(cache)
        stamp = (entry / "kernel.so").stat().st_mtime_ns
        env = build_env(BB_CACHE=cache)
        again = run([BBBACKEND, "build", self.dir / "be"], env, timeout=BUILD_TIMEOUT)
        self.assertEqual(again.returncode, 0, again.stdout + again.stderr)
        self.assertEqual(entries(cache), [entry])  # the same source, another folder: no new entry
        self.assertEqual((entry / "kernel.so").stat().st_mtime_ns, stamp)  # and not rebuilt
        (src / "relu.cpp").write_text((src / "relu.cpp").read_text() + "\n// changed\n")
        changed = run([BBBACKEND, "build", self.dir / "be"], env, timeout=BUILD_TIMEOUT)
        self.assertEqual(changed.returncode, 0, changed.stdout + changed.stderr)
        self.assertEqual(len(entries(cache)), 2)  # a changed source is a new entry

    def test_a_header_change_is_a_new_entry_not_a_stale_one(self):
        # a compile error (cached like a library, and quick to make) that comes from a header
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        (src / "relu.cpp").write_text('#include "detail/which.h"\n')
        (src / "detail").mkdir()
        env = build_env(BB_CACHE=self.dir / "cache")
        for which in ("first", "second"):
            (src / "detail" / "which.h").write_text(f"#error {which} version of the header\n")
            r = run([BBBACKEND, "build", self.dir / "be"], env, timeout=BUILD_TIMEOUT)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(f"{which} version of the header", r.stdout)
        self.assertEqual(len(entries(self.dir / "cache")), 2)

    def test_a_cache_others_can_write_is_made_private_before_use(self):
        cache = self.dir / "cache"
        shutil.copytree(self.shared / "cache", cache)
        os.chmod(cache, 0o777)
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(RELU, src)
        r = run([BBBACKEND, "build", self.dir / "be"], build_env(BB_CACHE=cache), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(cache.stat().st_mode & 0o022, 0)  # ours: group and world write taken away

    @unittest.skipUnless(os.geteuid() == 0, "needs root to give files to another user")
    def test_a_cache_or_entry_of_another_user_is_never_loaded(self):
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(RELU, src)
        # a library planted under the right key by another user, in a cache folder of ours
        cache = self.dir / "cache"
        shutil.copytree(self.shared / "cache", cache)
        (entry,) = entries(cache)
        os.chown(entry, 65534, 65534)
        r = run([BBBACKEND, "build", self.dir / "be"], build_env(BB_CACHE=cache), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cached kernel not loaded", r.stdout)
        self.assertIn("belongs to uid 65534", r.stdout)
        # the cache folder itself another user's (a /tmp/bbshim-cache-<uid> made by someone else)
        foreign = self.dir / "foreign"
        shutil.copytree(self.shared / "cache", foreign)
        os.chown(foreign, 65534, 65534)
        os.chmod(foreign, 0o777)
        r = run([BBBACKEND, "build", self.dir / "be"], build_env(BB_CACHE=foreign), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not safe to build into or load from", r.stdout)
        self.assertEqual(os.stat(foreign).st_mode & 0o777, 0o777)  # not ours to change

    def test_a_prebuilt_library_in_a_folder_is_loaded_as_is(self):
        prebuilt = self.dir / "prebuilt" / "relu__default"
        prebuilt.mkdir(parents=True)
        shutil.copy(self.relu_entry / "kernel.so", prebuilt / "relu.so")
        empty = self.dir / "empty"
        r = run([BBBACKEND, "build", self.dir / "prebuilt"], build_env(BB_CACHE=empty), timeout=BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("1 kernels usable, 0 problems", r.stdout)
        self.assertFalse(empty.exists() and entries(empty))  # nothing compiled

    def test_usage_error(self):
        r = run([BBBACKEND, "build"], base_env())
        self.assertEqual(r.returncode, 2)

    def test_cuda_example_compiles_and_every_kernel_is_usable(self):
        if not nvcc_available():
            if cuda_build():
                self.fail("the build has its CUDA parts (BB_WITH_CUDA=ON) but there is no nvcc or torch is not a "
                          "CUDA build: the CUDA sample backend cannot be compiled")
            self.skipTest("needs nvcc and a CUDA build of torch")
        # Nine nvcc compiles into the shared kernel cache (BB_CACHE): the GPU tests routing to
        # backends/cuda_example on an sm_90 GPU find them there.
        env = build_env(BB_CUDA_ARCH=os.environ.get("BB_CUDA_ARCH", "90"))
        r = run([BBBACKEND, "build", ROOT / "backends" / "cuda_example"], env, timeout=CUDA_BUILD_TIMEOUT)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("9 kernels usable, 0 problems", r.stdout)

if __name__ == "__main__":
    unittest.main()
