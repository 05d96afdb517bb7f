"""Assembles the served scripts (arena_cli.py, check_task.py, validation_gates.py,
openenv_check.py) from their sources in scripts/: each `# @include NAME` line becomes
scripts/shared/NAME, so the parts they share are written once while each served file stays one
standalone download (standard library only, no imports of ours). The output is the same bytes for
the same sources; build_site writes it into the site, which the arena serves and the tests run.

Usage: python3 dev/assemble_scripts.py OUT_DIR"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ROOT / "scripts"
SHARED = SOURCES / "shared"
SCRIPTS = ("arena_cli.py", "check_task.py", "validation_gates.py", "openenv_check.py")
INCLUDE = re.compile(r"# @include ([a-z_]+\.py)")


def shared_body(name):
    """The shared file without its leading comment (which says where it goes)."""
    lines = (SHARED / name).read_text().splitlines(keepends=True)
    while lines and (lines[0].startswith("#") or not lines[0].strip()):
        lines.pop(0)
    return "".join(lines).rstrip("\n") + "\n"


def assemble(script):
    """The served bytes of `script`."""
    out = []
    for line in (SOURCES / script).read_text().splitlines(keepends=True):
        m = INCLUDE.fullmatch(line.rstrip("\n"))
        if not m:
            out.append(line)
            continue
        name = m.group(1)
        out.append("# ---- %s: written once in scripts/shared/ for every served script ----\n\n\n" % name)
        out.append(shared_body(name))
        out.append("\n\n# ---- end of %s ----\n" % name)
    return "".join(out)


def main(argv):
    if len(argv) != 1:
        sys.stderr.write(__doc__.rsplit("\n", 1)[-1] + "\n")
        return 2
    dest = Path(argv[0])
    dest.mkdir(parents=True, exist_ok=True)
    for script in SCRIPTS:
        (dest / script).write_text(assemble(script))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
