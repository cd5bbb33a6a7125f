"""A pytest plugin that runs a seed package's own test suite against
chatfold's compat module: with ``-p seed_alias``, ``import rollmem`` (and
every ``rollmem.<submodule>``) gives ``chatfold.compat.rollmem``, and so for
``chatcram`` and ``sawtooth_memory``. Loaded before the suite's modules
import anything."""

import importlib
import pkgutil
import sys

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
