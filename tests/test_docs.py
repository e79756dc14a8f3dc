"""The Markdown docs hold together: every fence closes, every internal link and #anchor resolves, every `rlce-trl`
command they show answers `--help` with exit 0, the README's recipe table is `rlce-trl recipes`, and README and
guide pages carry no commit hashes.

Files: README.md, CHANGELOG.md, docs/*.md and every other tracked *.md (configs/accelerate/README.md).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

markdown_it = pytest.importorskip("markdown_it", reason="markdown-it-py is not installed (the test extra has it)")

ROOT = Path(__file__).resolve().parents[1]

#: Fence info strings whose lines are shell commands.
SHELL_FENCES = {"bash", "shell", "sh", "console"}


def markdown_files() -> list[Path]:
    files = {ROOT / "README.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").glob("*.md"),
             *(ROOT / "configs").rglob("*.md")}
    return sorted(path for path in files if path.is_file())


def _parser():
    return markdown_it.MarkdownIt("commonmark").enable("table")


def _tokens(path: Path):
    return _parser().parse(path.read_text(encoding="utf-8"))


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _walk(tokens):
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (word characters, hyphens and spaces kept),
    spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """The #anchors of a Markdown file: its headings' slugs (repeated ones numbered as GitHub does) and any
    explicit `<a id=...>` / `<a name=...>`."""
    tokens = _tokens(path)
    seen: dict[str, int] = {}
    found: set[str] = set()
    for at, token in enumerate(tokens):
        if token.type == "heading_open":
            inline = tokens[at + 1]
            text = "".join(child.content for child in inline.children or [] if child.type in ("text", "code_inline"))
            base = slug(text)
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found |= set(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", path.read_text(encoding="utf-8")))
    return found


def unclosed_fences(path: Path) -> list[int]:
    """1-based line numbers of code fences that never close (a renderer shows the rest of the file as code), or
    that hold another fence's opening line (```` ```python ```` inside a block: the block was left open above it, and
    every fence below pairs with the wrong partner)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    bad = []
    for token in _tokens(path):
        if token.type != "fence" or not token.map:
            continue
        start, end = token.map
        closing = lines[end - 1].strip() if end - 1 > start and end - 1 < len(lines) else ""
        marker = token.markup[0]
        closed = closing.startswith(token.markup) and set(closing) == {marker}
        opener = re.compile(rf"^\s*{re.escape(token.markup)}(?!{re.escape(marker)})\s*\w")
        if not closed or any(opener.match(line) for line in token.content.splitlines()):
            bad.append(start + 1)
    return bad


def links(path: Path) -> list[str]:
    """Every link target and image source of a Markdown file."""
    found = []
    for token in _walk(_tokens(path)):
        if token.type == "link_open":
            found.append(token.attrGet("href"))
        elif token.type == "image":
            found.append(token.attrGet("src"))
    return [target for target in found if target]


def broken_links(path: Path) -> list[str]:
    broken = []
    for target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:, ...: not checked offline
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        name = linked.relative_to(ROOT).as_posix() if linked.is_relative_to(ROOT) else str(linked)
        if not linked.exists():
            broken.append(f"{target} (no file {name})")
            continue
        if anchor and linked.suffix == ".md" and anchor not in anchors(linked):
            broken.append(f"{target} (no heading #{anchor} in {name})")
    return broken


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_every_code_fence_closes(path):
    assert not unclosed_fences(path), f"{_rel(path)}: fences opened at lines {unclosed_fences(path)} never close"


@pytest.mark.parametrize("path", markdown_files(), ids=_rel)
def test_internal_links_and_anchors_resolve(path):
    assert not broken_links(path), f"{_rel(path)}: {broken_links(path)}"


def test_the_checks_can_fail(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\nSee [here](#title), [there](#nowhere), [gone](missing.md) and [web](https://x.y/z).\n"
                    "\n```python\nx = 1\n```bash\nrlce-trl recipes\n```\n\n```bash\nrlce-trl report\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    assert unclosed_fences(page) == [5, 11]
    assert broken_links(page) == ["#nowhere (no heading #nowhere in page.md)", "missing.md (no file missing.md)"]
    assert commands_in(page) == {("report",)}  # the bash line inside the open python fence is not a command
    assert slug("Selecting at inference: sample once, select many") == "selecting-at-inference-sample-once-select-many"
    assert slug("`rlce-trl analyze` (the bench)") == "rlce-trl-analyze-the-bench"


# --- the commands the docs show -------------------------------------------------------------------------------------

_WORD = re.compile(r"^[a-z][a-z0-9_-]*$")


def _command_words(text: str) -> set[tuple[str, ...]]:
    """`rlce-trl <command> [<subcommand>]` of every occurrence in `text`: the (at most two) bare lower-case words
    after `rlce-trl`, up to the first flag, path or placeholder."""
    found = set()
    for match in re.finditer(r"(?<![\w/.-])rlce-trl((?:[ \t]+\S+)*)", text):
        words = []
        for word in match.group(1).split()[:2]:
            if not _WORD.match(word):
                break
            words.append(word)
        if words:
            found.add(tuple(words))
    return found


def commands_in(path: Path) -> set[tuple[str, ...]]:
    """The commands a Markdown file shows in shell fences and in inline code."""
    found: set[tuple[str, ...]] = set()
    for token in _walk(_tokens(path)):
        if token.type == "fence" and token.info.strip().split(" ")[0] in SHELL_FENCES:
            found |= _command_words(token.content.replace("\\\n", " "))
        elif token.type == "code_inline":
            found |= _command_words(token.content)
    return found


def documented_commands() -> list[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for path in markdown_files():
        found |= commands_in(path)
    return sorted(found)


def test_the_docs_show_the_commands():
    shown = {words[0] for words in documented_commands()}
    assert {"train", "recipes", "evaluate", "select", "sample", "calibrate", "coevolve", "report", "analyze"} <= shown


@pytest.mark.parametrize("words", documented_commands(), ids=" ".join)
def test_every_documented_command_answers_help(words):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]),
           "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-c", "import sys; from rlce_trl.cli import main; sys.exit(main())",
                          *words, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"rlce-trl {' '.join(words)} --help: exit {run.returncode}\n{run.stderr[-2000:]}"
    assert "usage" in run.stdout.lower(), run.stdout[-2000:]


# --- README and guide pages -----------------------------------------------------------------------------------------


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_recipe_table_is_rlce_trl_recipes():
    from rlce_trl.training.recipes import markdown_table

    table = re.search(r"<!-- recipes -->\n(.*?)\n<!-- /recipes -->", _readme(), re.S)
    assert table, "README.md: no <!-- recipes --> ... <!-- /recipes --> block"
    assert table.group(1).strip() == markdown_table(), (
        "README.md's recipe table differs from the shipped recipes; paste the output of\n"
        "  python -c 'from rlce_trl.training.recipes import markdown_table; print(markdown_table())'\n"
        + markdown_table()
    )


def test_every_recipe_title_is_a_whole_sentence(tmp_path):
    from rlce_trl.training.recipes import describe, list_recipes

    cut = [path.stem for path in list_recipes() if not describe(path).endswith(".")]
    assert not cut, f"recipe titles cut mid-phrase (end the first sentence of the header with a full stop): {cut}"
    recipe = tmp_path / "r.yaml"
    recipe.write_text("# A title over\n# two lines (with a note). More.\n#   rlce-trl train --config r\nbeta: 0\n")
    assert describe(recipe) == "A title over two lines (with a note)."


def test_readme_is_a_short_manual():
    lines = _readme().splitlines()
    assert len(lines) <= 326, f"README.md has {len(lines)} lines: move detail to a page under docs/"
    for command in ("make quickstart", "make test"):
        assert f"\n{command}" in _readme(), command


def test_readme_and_guides_carry_no_commit_hashes():
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for word in re.findall(r"(?<![\w./-])[0-9a-f]{7,40}(?![\w/-])", path.read_text(encoding="utf-8")):
            assert not (re.search(r"[a-f]", word) and re.search(r"[0-9]", word)), f"{_rel(path)}: {word}"


def documented_names() -> set[str]:
    """Every dotted `rlce_trl....` name and every `from rlce_trl... import a, b` that README.md and docs/ show."""
    names: set[str] = set()
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        names |= set(re.findall(r"(?<![\w/])rlce_trl(?:\.[A-Za-z_]\w*)+", text))
        for module, imported in re.findall(r"from (rlce_trl[\w.]*) import ([\w, ]+)", text):
            names |= {f"{module}.{name.strip()}" for name in imported.split(",") if name.strip()}
    return names


def resolves(name: str) -> bool:
    """Whether `name` is a module, or an attribute reached from the longest importable module prefix."""
    import importlib

    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_documented_python_names_exist(monkeypatch):
    monkeypatch.setenv("RLCE_VERIFIER", "http://127.0.0.1:9")  # rlce_trl.rlce_reward is built from it when looked up
    names = documented_names()
    assert {"rlce_trl.RLCEGRPOConfig", "rlce_trl.RLCEGRPOTrainer", "rlce_trl.selection.select_answer"} <= names
    assert not resolves("rlce_trl.selection.no_such_name")
    missing = sorted(name for name in names if not resolves(name))
    assert not missing, f"README.md / docs/ name what the package does not have: {missing}"
