"""Outside torch programs the preload does nothing: no output, no files, no change in behaviour.
BB_DISABLE=1 turns it off inside torch programs too."""
import shutil
import unittest

from support import BUILD, PRELOAD, PYTHON, TempDirTest, base_env, preload_env, run

MAPS = "import sys; sys.stdout.write(str('libbbshim_runtime' in open('/proc/self/maps').read()))"


class Inert(TempDirTest):
    def assert_untouched(self, cmd, **bb):
        plain = run(cmd, base_env(), cwd=self.dir)
        pre = run(cmd, preload_env(**bb), cwd=self.dir)
        self.assertEqual(pre.returncode, plain.returncode)
        self.assertEqual(pre.stdout, plain.stdout)
        self.assertEqual(pre.stderr, plain.stderr)
        self.assertEqual(list(self.dir.iterdir()), [])  # no trace, no temporary, no lock file
        return pre

    def test_shell(self):
        self.assert_untouched(["sh", "-c", "echo hi; ls / >/dev/null; echo bye >&2"])

    def test_python_without_torch(self):
        r = self.assert_untouched([PYTHON, "-c", MAPS])
        self.assertEqual(r.stdout, "False")

    def test_compiler(self):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            self.skipTest("no C compiler here")
        self.assert_untouched([cc, "--version"])

    def test_disabled_in_a_torch_program(self):
        code = "import torch; (torch.ones(3) + 1).sum(); " + MAPS
        r = self.assert_untouched([PYTHON, "-c", code], BB_DISABLE=1)
        self.assertEqual(r.stdout, "False")

    def test_enabled_in_a_torch_program_for_contrast(self):
        code = "import torch; (torch.ones(3) + 1).sum(); " + MAPS
        r = run([PYTHON, "-c", code], preload_env(), cwd=self.dir)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, "True", ""))
        self.assertEqual([f.name for f in self.dir.iterdir()], ["bbtrace.yaml"])

    def test_import_without_ops_leaves_no_file(self):
        r = run([PYTHON, "-c", "import torch"], preload_env(), cwd=self.dir)
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertEqual(list(self.dir.iterdir()), [])

    def test_libraries_that_dlopen_by_name_still_find_their_runpath(self):
        # loader.so has RUNPATH $ORIGIN/sub and dlopens "libbb_test_target.so" by bare name; glibc
        # must still see loader.so (not the preload) as the caller to search that RUNPATH.
        runpath = BUILD / "tests" / "runpath"
        r = self.assert_untouched([BUILD / "bin" / "bb_test_dlopen_runpath", runpath / "libbb_test_loader.so"])
        self.assertEqual(r.stdout, "target loaded\n")

    def test_cupti_wrappers_forward_to_the_callers_libcupti(self):
        # A library that links its own libcupti, loaded RTLD_LOCAL (as torch's is): every wrapped
        # CUPTI call must still reach that libcupti and return its answer; the preload notes each kind.
        client = BUILD / "tests" / "cupti_fake" / "libbb_test_cupti_client.so"
        cmd = [BUILD / "bin" / "bb_test_cupti_wrappers", client]
        plain = run(cmd, base_env(), cwd=self.dir)
        pre = run(cmd, preload_env(), cwd=self.dir)
        self.assertEqual((plain.returncode, plain.stdout), (0, "4201 4202 4203 4204 4205 seen -1\n"), plain.stderr)
        self.assertEqual((pre.returncode, pre.stdout, pre.stderr), (0, "4201 4202 4203 4204 4205 seen 15\n", ""))

    def test_preload_has_no_torch_or_cxx_dependency(self):
        deps = run(["ldd", PRELOAD], base_env()).stdout
        for lib in ("libtorch", "libc10", "libstdc++", "libyaml"):
            self.assertNotIn(lib, deps)

    def test_every_cxx_library_shares_the_process_libstdcxx(self):
        # A static copy of libstdc++ inside a library that trades strings and streams with libtorch breaks
        # (its iostreams were never set up: a kernel's error message crashed the program on one host).
        readelf = shutil.which("readelf")
        if not readelf:
            self.skipTest("no readelf here")
        libs = [p for p in sorted((BUILD / "lib").glob("*.so")) if p != PRELOAD]
        self.assertTrue(any(p.name == "libbbshim_runtime.so" for p in libs), libs)
        for lib in libs:
            dyn = run([readelf, "-dW", lib], base_env()).stdout
            needed = [line.split()[-1] for line in dyn.splitlines() if "(NEEDED)" in line]
            self.assertIn("[libstdc++.so.6]", needed, f"{lib} does not load libstdc++.so.6 (linked statically?)")
            syms = run([readelf, "-sW", lib], base_env()).stdout
            self.assertNotRegex(syms, r"(?m) FUNC +GLOBAL +\w+ +\d+ _ZNSt8ios_base4InitC[12]Ev$",
                                f"{lib} holds its own copy of libstdc++")


if __name__ == "__main__":
    unittest.main()
