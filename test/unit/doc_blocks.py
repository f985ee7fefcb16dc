"""Run the code blocks of a markdown document, so that docs cannot rot.

A document is executed top to bottom in a fresh temporary directory:

* ```` ```python ```` blocks run in one namespace per document (a later
  block sees an earlier block's names);
* a block whose info string has `file=NAME` (```` ```python file=my_pass.py ````,
  ```` ```nem file=prog.nem ````, ```` ```text file=lit.cfg.py ````) is not run
  but written to NAME, for the commands after it;
* ```` ```console ```` blocks are `$ command` lines each followed by the
  output it must print (stdout and stderr together, exactly, after
  `{TMP}` in the text is replaced by the temporary directory and `{ROOT}`
  by the repository); a command that must fail ends with `# exit N`;
* any other block (```` ```sh ````, ```` ```text ````, ...) is left alone.

`{ROOT}` and `{TMP}` may also appear in python and `file=` blocks.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.MULTILINE | re.DOTALL)


@dataclass
class Block:
    lang: str
    options: dict[str, str]
    text: str
    line: int


def blocks(markdown: str) -> list[Block]:
    out = []
    for m in _FENCE.finditer(markdown):
        words = m.group(1).split()
        lang = words[0] if words else ""
        options = dict(w.split("=", 1) for w in words[1:] if "=" in w)
        out.append(Block(lang, options, m.group(2), markdown.count("\n", 0, m.start()) + 1))
    return out


def tool_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.pop("NEM_TRACEBACK", None)
    env["COLUMNS"] = "100"
    return env


def run_console(block: Block, tmp: Path, where: str, cwd: Path) -> None:
    """Run each `$ command` of a console block and compare its output."""
    lines = block.text.splitlines()
    k = 0
    while k < len(lines):
        if not lines[k].startswith("$ "):
            raise AssertionError(f"{where}:{block.line + 1 + k}: expected '$ command'")
        cmd = lines[k][2:]
        want_rc = 0
        m = re.search(r"\s+# exit (\d+)$", cmd)
        if m:
            want_rc, cmd = int(m.group(1)), cmd[: m.start()]
        k += 1
        expected = []
        while k < len(lines) and not lines[k].startswith("$ "):
            expected.append(lines[k])
            k += 1
        cmd = _subst(cmd, tmp)
        r = subprocess.run(
            ["bash", "-c", cmd],
            cwd=cwd,
            env=tool_env(tmp),
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        got = (r.stdout + r.stderr).rstrip("\n").splitlines()
        want = [_subst(x, tmp) for x in expected]
        assert r.returncode == want_rc and got == want, (
            f"{where}:{block.line}: `{cmd}` exited {r.returncode} (want {want_rc})\n"
            f"--- got\n" + "\n".join(got) + "\n--- want\n" + "\n".join(want)
        )


def _subst(text: str, tmp: Path) -> str:
    return text.replace("{TMP}", str(tmp)).replace("{ROOT}", str(ROOT))


def run_document(path: Path, tmp: Path, cwd: Path | None = None) -> int:
    """Execute every block of `path` in `tmp` (commands and python blocks in
    `cwd` when given: the README's commands run from the repository root);
    returns how many ran."""
    scope: dict = {"__name__": "__doc__"}
    ran = 0
    where_run = cwd or tmp
    cwd_before = os.getcwd()
    os.chdir(where_run)
    sys.path.insert(0, str(tmp))
    try:
        for b in blocks(path.read_text(encoding="utf-8")):
            where = f"{path.relative_to(ROOT)}:{b.line}"
            if "file" in b.options:
                (tmp / b.options["file"]).parent.mkdir(parents=True, exist_ok=True)
                (tmp / b.options["file"]).write_text(_subst(b.text, tmp), encoding="utf-8")
            elif b.lang == "python":
                code = compile(_subst(b.text, tmp), where, "exec")
                exec(code, scope)  # noqa: S102 - running the documentation is the point
                ran += 1
            elif b.lang == "console":
                run_console(b, tmp, str(path.relative_to(ROOT)), where_run)
                ran += 1
    finally:
        sys.path.remove(str(tmp))
        os.chdir(cwd_before)
    return ran
