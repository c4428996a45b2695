"""Queued DVC experiments that see what a workspace run sees, or stop saying why.

``dvc exp run --queue`` runs each experiment in a temporary copy of the repository,
``.dvc/tmp/exps/tmpXXXX``, that holds only git-tracked files and the DVC outputs it restores.
Three things a workspace run reads are not among them:

- the request cache (``data/cache``): git-ignored and not a DVC output, so a queued run would repeat
  every LLM call the baseline already made. Each experiment is queued with ``-C data/cache``
  (DVC's ``--copy-paths``): it starts from a copy of the workspace's cache (its own new calls stay
  in its temporary copy);
- the knowledge bases (``data/kb``): the Chroma store is rewritten whenever it is opened, so only
  its ``manifest.json`` is a DVC output; without ``-C data/kb`` the RAM2C groups would retrieve
  from an empty store;
- ``../shared`` (the public data beside the project): relative to the copy it names
  ``.dvc/tmp/exps/shared``, so a queued run would silently fall back to the demo files.
  :func:`link_shared` links that name to the workspace's ``../shared`` before the queue runs.

:func:`check_queued_run` runs at the start of every stage (``pipelines.stage``): inside a queued or
``--temp`` experiment (DVC sets ``DVC_ROOT`` to the workspace, which then differs from the
project folder) it compares each of these with the workspace and raises
:class:`QueuedRunError` naming what is missing and the fix.
"""

from __future__ import annotations

import os
from pathlib import Path

from pipelines.errors import StageError

COPIED = ("data/cache", "data/kb")  # ignored paths a queued run gets with -C (copied, if the workspace has them)
SHARED = "shared"  # ../shared, the public data beside the project
TOOL = "python -m pipelines.evaluation.ablation.experiments"  # the ablation queue, the one user of these copies
EXEC_TMP_DIR = "exps"  # dvc.repo.experiments.utils.EXEC_TMP_DIR (importing dvc costs each stage seconds; tested)


class QueuedRunError(StageError):
    """A queued experiment that would not see the workspace's inputs."""


def copy_paths(root: Path | str = ".") -> list[str]:
    """The ``-C`` paths for ``dvc exp run --queue``: those of :data:`COPIED` the workspace has."""
    return [path for path in COPIED if (Path(root) / path).exists()]


def copy_flags(root: Path | str = ".") -> list[str]:
    return [flag for path in copy_paths(root) for flag in ("-C", path)]


def experiments_folder(root: Path | str = ".") -> Path:
    """Where DVC makes the temporary copies of queued experiments (``.dvc/tmp/exps``)."""
    return Path(root) / ".dvc" / "tmp" / EXEC_TMP_DIR


def link_shared(root: Path | str = ".") -> list[Path]:
    """Make ``../shared`` of every queued (``.dvc/tmp/exps/tmpXXXX``) and ``--temp``
    (``.dvc/tmp/exps/standalone/tmpXXXX``) copy the workspace's ``../shared``: a symbolic link
    named ``shared`` beside those copies (made or corrected); [] when the workspace has none."""
    root = Path(root).resolve()
    target = root.parent / SHARED
    if not target.is_dir():
        return []
    links = []
    for folder in (experiments_folder(root), experiments_folder(root) / "standalone"):
        link = folder / SHARED
        folder.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and Path(os.readlink(link)) == target:
            links.append(link)
            continue
        if link.is_symlink() or link.is_file():
            link.unlink()
        elif link.exists():
            raise QueuedRunError(f"{link} is a folder; remove it so that queued experiments can link ../shared")
        link.symlink_to(target, target_is_directory=True)
        links.append(link)
    return links


def queued_workspace(here: Path | str = ".") -> Path | None:
    """The workspace of the DVC experiment running in ``here`` (``DVC_ROOT`` when it is another
    folder), or None in a workspace run."""
    root = os.environ.get("DVC_ROOT")
    if not root:
        return None
    workspace, here = Path(root).resolve(), Path(here).resolve()
    return None if workspace == here else workspace


def missing_in_copy(workspace: Path, here: Path) -> list[str]:
    """What ``workspace`` has and the copy ``here`` lacks: the :data:`COPIED` paths and ``../shared``."""
    missing = [path for path in COPIED if (workspace / path).exists() and not (here / path).exists()]
    if (workspace.parent / SHARED).is_dir() and not (here.parent / SHARED).is_dir():
        missing.append(f"../{SHARED}")
    return missing


def check_queued_run(here: Path | str = ".") -> None:
    """Raise :class:`QueuedRunError` inside a queued experiment that lacks what the workspace has."""
    workspace = queued_workspace(here)
    if workspace is None:
        return
    missing = missing_in_copy(workspace, Path(here).resolve())
    if not missing:
        return
    flags = " ".join(f"-C {path}" for path in missing if not path.startswith("../"))
    fixes = [f"queue it with `{TOOL} queue` (which passes {' '.join(copy_flags(workspace)) or 'the -C paths'} "
             "and links ../shared)"]  # fmt: skip
    if flags:
        fixes.append(f"or add `{flags}` to `dvc exp run --queue`")
    if f"../{SHARED}" in missing:
        fixes.append(f"and run `{TOOL} link` before `dvc exp run --run-all`")
    raise QueuedRunError(
        f"this DVC experiment runs in a temporary copy ({Path(here).resolve()}) that lacks "
        f"{', '.join(missing)} of the workspace {workspace}: it would repeat cached LLM calls, retrieve from an "
        f"empty knowledge base or fall back to demo data. Fix: {'; '.join(fixes)}."
    )
