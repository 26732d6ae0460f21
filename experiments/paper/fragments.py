"""Studies with their own generators, spliced into docs/RESULTS.md.

Some results come from experiments outside `make report` (the async seeds study, the cost-curve
controllers, the language model). Each such experiment writes one markdown file under
`docs/results/` that starts with a `## ` heading and states the command that produced it. This
module puts those files, in name order, between two markers in RESULTS.md: `results_doc.build`
writes the markers when it regenerates the document, and

    python -m experiments.paper.fragments [--docs docs]

replaces what lies between them in the existing document, without rerunning any ablation.
"""

from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys

START = "<!-- studies: generated from docs/results/*.md by experiments.paper.fragments -->"
END = "<!-- end of studies -->"
# Where the block goes in a document that has no markers yet: before the first of these.
ANCHORS = ("## Where we agree", "## Figures", "## Sources")


def tracked(path: str) -> bool:
    """Whether git tracks `path`; True outside a git checkout (nothing to check against)."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "--error-unmatch", os.path.basename(path)],
            cwd=os.path.dirname(os.path.abspath(path)),
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return True
    if out.returncode == 0:
        return True
    # 128: not a git checkout at all (a temporary --small folder); 1: untracked
    return b"not a git repository" in out.stderr


def collect(docs: str) -> list[str]:
    """The studies' markdown, one string per file of DOCS/results/*.md, in name order."""
    out = []
    for path in sorted(glob.glob(os.path.join(docs, "results", "*.md"))):
        if not tracked(path):  # a study not yet committed is no source for the document
            print(f"[fragments] skipped {path}: not tracked by git")
            continue
        with open(path) as f:
            text = f.read().strip()
        if text.startswith("# "):  # a document of its own: linked, not spliced
            title, name = text.splitlines()[0][2:].strip(), os.path.basename(path)
            text = f"## {title}\n\nA document of its own: [docs/results/{name}](results/{name})."
        elif not text.startswith("## "):
            raise ValueError(f"{path}: a study must start with a '## ' heading (or '# ')")
        out.append(text)
    return out


def block(studies: list[str]) -> str:
    """The marked block (markers included) holding the studies."""
    return "\n\n".join([START, *studies, END]) + "\n"


def splice(document: str, studies: list[str]) -> str:
    """DOCUMENT with its marked block replaced by STUDIES (inserted before an anchor if absent)."""
    new = block(studies)
    if START in document:
        head, rest = document.split(START, 1)
        if END not in rest:
            raise ValueError(f"RESULTS.md has '{START}' but no '{END}'")
        tail = rest.split(END, 1)[1].lstrip("\n")
        return head + new + "\n" + tail
    for anchor in ANCHORS:
        at = document.find("\n" + anchor)
        if at >= 0:
            return document[: at + 1] + new + "\n" + document[at + 1 :]
    return document.rstrip("\n") + "\n\n" + new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--docs", default="docs", help="folder holding RESULTS.md and results/")
    args = p.parse_args(argv)
    path = os.path.join(args.docs, "RESULTS.md")
    if not os.path.isfile(path):  # a traceback before
        p.error(f"--docs {args.docs}: no RESULTS.md there")
    with open(path) as f:
        document = f.read()
    studies = collect(args.docs)
    with open(path, "w") as f:
        f.write(splice(document, studies))
    print(f"[fragments] {len(studies)} studies spliced into {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
