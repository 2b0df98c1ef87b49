"""What the loaders of the vendored programs share (tests/programs/*/_load.py): the text
with its import lines turned back to the original library's, stub modules for what a
program imports but the tests never use, and a fresh module that runs the text."""

import contextlib
import pathlib
import sys
import types

_COUNT = [0]


def original_source(path: pathlib.Path, imports: dict[str, str]) -> str:
    """The program's text with each vendored import line replaced by the original's."""
    return "\n".join(imports.get(line, line) for line in path.read_text().split("\n"))


def stub_modules(where: str, *names: str) -> dict[str, types.ModuleType]:
    """sys.modules entries for packages (dotted names: every parent too) whose attributes
    raise on use: matplotlib for the plotting `__main__` blocks, a dataset downloader."""

    def unavailable(attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise RuntimeError(f"{attr}: a stub in {where}")

    modules: dict[str, types.ModuleType] = {}
    for name in names:
        parts = name.split(".")
        for i in range(1, len(parts) + 1):
            dotted = ".".join(parts[:i])
            if dotted not in modules:
                modules[dotted] = types.ModuleType(dotted)
                modules[dotted].__getattr__ = unavailable
            if i > 1:
                setattr(modules[".".join(parts[: i - 1])], parts[i - 1], modules[dotted])
    return modules


@contextlib.contextmanager
def modules_swapped(entries: dict, path: pathlib.Path, restore: tuple[str, ...] = ()):
    """`entries` in sys.modules and `path` on sys.path while a program loads; both put
    back afterwards, and the modules named in `restore` (what the program may import
    from `path`) as they were before."""
    saved = {name: sys.modules.get(name) for name in (*entries, *restore)}
    sys.modules.update(entries)
    sys.path.insert(0, str(path))
    try:
        yield
    finally:
        sys.path.remove(str(path))
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


def run_program(prefix: str, path: pathlib.Path, text: str) -> types.ModuleType:
    """A fresh module (a unique name each time) that has run `text` as file `path`."""
    _COUNT[0] += 1
    module = types.ModuleType(f"_{prefix}_{path.stem}_{_COUNT[0]}")
    module.__file__ = str(path)
    exec(compile(text, module.__file__, "exec"), module.__dict__)
    return module
