"""bbbackend builds and checks backend folders ahead of time; the CUDA sample backend compiles
wherever nvcc and a CUDA build of torch are (it runs on the GPU host: tests/integration/test_cuda.py)."""
import shutil
import unittest

from support import BUILD, ROOT, TempDirTest, base_env, run

BBBACKEND = BUILD / "bin" / "bbbackend"


def nvcc_available():
    import os
    import torch
    return torch.version.cuda is not None and bool(
        shutil.which("nvcc") or os.environ.get("BB_NVCC") or os.path.exists("/usr/local/cuda/bin/nvcc"))


class BackendBuild(TempDirTest):
    def test_cpu_reference_builds_and_every_kernel_is_usable(self):
        r = run([BBBACKEND, "build", ROOT / "backends" / "cpu_reference"], base_env(), timeout=900)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("9 kernels usable, 0 problems", r.stdout)
        self.assertIn("ok       aten::native_layer_norm", r.stdout)

    def test_a_broken_backend_exits_1_and_lists_each_problem(self):
        r = run([BBBACKEND, "build", ROOT / "tests" / "backends" / "broken"], base_env(), timeout=900)
        self.assertEqual(r.returncode, 1)
        self.assertIn("1 kernels usable, 5 problems", r.stdout)

    def test_cache_is_reused(self):
        env = dict(base_env(), BB_CACHE=str(self.dir))
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(ROOT / "backends" / "cpu_reference" / "relu__default" / "relu.cpp", src)
        first = run([BBBACKEND, "build", self.dir / "be"], env, timeout=900)
        self.assertEqual(first.returncode, 0, first.stdout)
        entries = [p for p in self.dir.iterdir() if p.name != "be" and not p.name.startswith(".")]
        self.assertEqual(len(entries), 1)  # one cache entry
        again = run([BBBACKEND, "build", self.dir / "be"], env, timeout=900)
        self.assertEqual(again.returncode, 0)
        (src / "relu.cpp").write_text((src / "relu.cpp").read_text() + "\n// changed\n")
        run([BBBACKEND, "build", self.dir / "be"], env, timeout=900)
        entries = [p for p in self.dir.iterdir() if p.name != "be" and not p.name.startswith(".")]
        self.assertEqual(len(entries), 2)  # a changed source is a new entry

    def test_a_prebuilt_library_in_a_folder_is_loaded_as_is(self):
        env = dict(base_env(), BB_CACHE=str(self.dir / "cache"))
        src = self.dir / "be" / "relu__default"
        src.mkdir(parents=True)
        shutil.copy(ROOT / "backends" / "cpu_reference" / "relu__default" / "relu.cpp", src)
        self.assertEqual(run([BBBACKEND, "build", self.dir / "be"], env, timeout=900).returncode, 0)
        (built,) = (self.dir / "cache").glob("*/kernel.so")
        prebuilt = self.dir / "prebuilt" / "relu__default"
        prebuilt.mkdir(parents=True)
        shutil.copy(built, prebuilt / "relu.so")
        r = run([BBBACKEND, "build", self.dir / "prebuilt"], dict(env, BB_CACHE=str(self.dir / "empty")))
        self.assertEqual(r.returncode, 0, r.stdout)
        self.assertIn("1 kernels usable, 0 problems", r.stdout)
        self.assertFalse((self.dir / "empty").exists() and any((self.dir / "empty").iterdir()))  # nothing compiled

    def test_usage_error(self):
        r = run([BBBACKEND, "build"], base_env())
        self.assertEqual(r.returncode, 2)

    @unittest.skipUnless(nvcc_available(), "needs nvcc and a CUDA build of torch")
    def test_cuda_example_compiles_and_every_kernel_is_usable(self):
        env = dict(base_env(), BB_CUDA_ARCH=base_env().get("BB_CUDA_ARCH", "90"))
        r = run([BBBACKEND, "build", ROOT / "backends" / "cuda_example"], env, timeout=1800)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("9 kernels usable, 0 problems", r.stdout)


if __name__ == "__main__":
    unittest.main()
