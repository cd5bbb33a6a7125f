"""A pytest plugin that runs a seed package's own test suite against
chatfold's compat module: with ``-p seed_alias``, ``import rollmem`` (and
every ``rollmem.<submodule>``) gives ``chatfold.compat.rollmem``, and so for
``chatcram`` and ``sawtooth_memory``. Loaded before the suite's modules
import anything.

When the suite is sawtooth-memory's (its sdist's ``PKG-INFO`` in the
rootdir), the tests of :mod:`sawtooth_skips` are skipped with their reasons,
and the summary says how many, by category."""

import importlib
import os
import pkgutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import pytest  # noqa: E402

from sawtooth_skips import skip_for  # noqa: E402

SEEDS = {
    "rollmem": "chatfold.compat.rollmem",
    "chatcram": "chatfold.compat.chatcram",
    "sawtooth_memory": "chatfold.compat.sawtooth",
}

for name, target in SEEDS.items():
    package = importlib.import_module(target)
    sys.modules[name] = package
    for info in pkgutil.walk_packages(package.__path__, prefix=f"{target}."):
        sys.modules[name + info.name[len(target):]] = importlib.import_module(info.name)


def _is_sawtooth(config: Any) -> bool:
    """Whether the suite being run is sawtooth-memory's (its sdist's PKG-INFO names it)."""
    info = Path(str(config.rootpath)) / "PKG-INFO"
    try:
        return "\nName: sawtooth-memory\n" in "\n" + info.read_text(encoding="utf-8")
    except OSError:
        return False


def pytest_collection_modifyitems(config: Any, items: List[Any]) -> None:
    """Marks the skip list's tests skipped, with their category and reason."""
    if not _is_sawtooth(config):
        return
    for item in items:
        entry = skip_for(item.nodeid)
        if entry is not None:
            category, reason = entry
            item.add_marker(pytest.mark.skip(reason=f"chatfold.compat.sawtooth skip list ({category}): {reason}"))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: Any) -> None:
    """The skip list's counts by category."""
    if not _is_sawtooth(config):
        return
    counts: Counter = Counter()
    for report in terminalreporter.stats.get("skipped", []):
        reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else ""
        marker = "chatfold.compat.sawtooth skip list ("
        if marker in reason:
            counts[reason.split(marker, 1)[1].split(")", 1)[0]] += 1
    terminalreporter.write_sep("-", "chatfold.compat.sawtooth skip list")
    for category, count in sorted(counts.items()):
        terminalreporter.write_line(f"{count} skipped: {category}")
