"""MkDocs hook: the navigation's order (pages are found, not listed, so a page another change adds
appears by itself) and the pages the site links to that another part of the project writes.

The navigation is MkDocs' own, built from the folders; this hook only puts its top-level sections in the
order a reader wants them (:data:`ORDER`: a page by its file, a section by its title), each section's
``index.md`` first and the rest by file name.
"""

from __future__ import annotations

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.nav import Navigation, Section

ORDER = ("index.md", "getting-started.md", "Tutorials", "How to", "Concepts", "Reference")

TITLES = {"Api": "Python API"}  # a folder's title where its name does not say it

# Linked from the tutorials; written with the feature it documents. Until then the link leads here.
PENDING = {
    "how-to/tuning.md": (
        "# Choosing what to fine-tune\n\n"
        "Which weights `vitlab train --init` updates (`--tune full|head|last-K|lora|bitfit|prompt`) is "
        "described here once the option is part of vitlab. Until then a fine-tune updates every weight, at "
        "the rates of `--recipe finetune` ([tutorial 5](../tutorials/05-your-photos.md)).\n"
    ),
}


def on_files(files: Files, config: MkDocsConfig) -> Files:
    for path, text in PENDING.items():
        if files.get_file_from_path(path) is None:
            files.append(File.generated(config, path, content=text))
    return files


def on_nav(nav: Navigation, config: MkDocsConfig, files: Files) -> Navigation:
    def rank(item: object) -> int:
        file = getattr(item, "file", None)
        key = item.title if isinstance(item, Section) else file.src_uri if file is not None else ""
        return ORDER.index(key) if key in ORDER else len(ORDER)

    nav.items.sort(key=rank)
    for section in (item for item in nav.items if isinstance(item, Section)):
        for child in section.children:
            if isinstance(child, Section) and child.title in TITLES:
                child.title = TITLES[child.title]
    return nav
