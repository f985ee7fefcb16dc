# -*- Python -*-
"""lit configuration of the NEM toolchain's end-to-end tests (lit >= 18, tested with 23).

Run from the repository root:   lit -v test/lit     (or: bash test/run_all.sh)

Tests live under test/lit (suffixes .nem, .mlir, .test; `Inputs` folders are
helper files, not tests).  RUN lines may use:

  nem-opt, nem-run       the NEM tools of the Python running lit
  nem-compile            (guard with `REQUIRES: mlir-python`)
  filecheck, FileCheck   the `filecheck` Python package (FileCheck -> filecheck)
  not                    lit's internal shell builtin
  mlir-opt               upstream MLIR (optional `mlir` extra); guard the test
                         with `REQUIRES: mlir-opt`
  %python                the Python running lit (sys.executable)
  %devices, %examples    the shipped device configs (devices/nem/devices/) and examples/
  %llvm-filecheck        LLVM's own FileCheck (feature `llvm-filecheck`)

All but %examples come from `nem.cli.lit_config.configure`,
which a user's own lit suite calls the same way (docs/testing.md).

lit finds this file by walking up from the paths it is given, and numbers a
test's path from the folder holding this file; so the suite's source root is
the repository root and the test format only picks up files under test/lit.
"""

import os

import lit.formats

from nem.cli.lit_config import EXCLUDES, SUFFIXES, configure

# `config` and `lit_config` are injected by lit.
repo_root = os.path.dirname(os.path.abspath(__file__))
TEST_DIR = ("test", "lit")


class NemShTest(lit.formats.ShTest):
    """ShTest (lit's internal shell) restricted to files under test/lit."""

    def getTestsForPath(self, testSuite, path_in_suite, litConfig, localConfig):
        if tuple(path_in_suite[: len(TEST_DIR)]) != TEST_DIR:
            return
        if any(part in localConfig.excludes for part in path_in_suite[:-1]):
            return
        yield from super().getTestsForPath(testSuite, path_in_suite, litConfig, localConfig)

    def __reduce__(self):
        # lit pickles each test's config to its worker processes, and a class
        # defined in a config file cannot be unpickled there.  Workers only
        # execute tests, which is plain ShTest's job.
        return (lit.formats.ShTest, (False,))


config.name = "NEM"
# lit 23: ShTest(execute_external=False) = lit's internal shell (provides `not`).
config.test_format = NemShTest(False)
config.suffixes = list(SUFFIXES)
config.excludes = list(EXCLUDES)
config.test_source_root = repo_root
config.test_exec_root = repo_root  # %t lands in test/lit/**/Output/ (git-ignored)

# Tools, substitutions and features: the same setup a user's suite gets
# (`nem.cli.lit_config.configure`, docs/testing.md).
configure(config)

# This repository's own: the examples.
config.substitutions.insert(1, ("%examples", os.path.join(repo_root, "examples")))
