"""The on-disk kernel cache: generated modules as real, verified .py files.

Why real files: Numba's `cache=True` finds its cache through the function's
source file, so code made with `exec` on a string can never be cached. Each
module is written once to `<cache dir>/tg_<hash>.py`, where the hash covers
the source text and the tracegrad and Numba versions, so:

  - the file is never rewritten (Numba stamps its cache by the file's mtime and
    size; rewriting would invalidate it). Creation is atomic: write a temp file
    in the same dir, then hard-link it into place (fails if another process
    won the race: its file is then used), or `os.replace` where links fail;
  - before import, the file's content is hashed again and compared with its
    name; a truncated or corrupted file is rebuilt. The verified bytes are the
    ones executed (no re-read between check and use);
  - the module is registered in `sys.modules` before its code runs, so Numba
    can unpickle references to it in a new process.

Security (a writable cache is a code-injection path): the directory is
created with mode 0700; a directory owned by another user, or writable by
group or others, is refused with a warning (no disk cache then). A read-only
directory also means no disk cache, with one warning.

    >>> import os; d = cache_dir()  # $TRACEGRAD_CACHE_DIR or ~/.cache/tracegrad
"""
from __future__ import annotations

import hashlib
import importlib
import logging
import os
import stat
import sys
import tempfile
import threading
import types
import warnings
from pathlib import Path

log = logging.getLogger("tracegrad")

_WARNED: set[str] = set()
_LOCK = threading.Lock()
HASH_CHARS = 32


class CacheWarning(UserWarning):
    """The kernel cache directory cannot be used; kernels are compiled in memory."""


def _warn_once(key: str, message: str) -> None:
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(message, CacheWarning, stacklevel=4)
    log.warning(message)


def default_cache_dir() -> Path:
    env = os.environ.get("TRACEGRAD_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tracegrad"


def cache_dir() -> Path | None:
    """The usable cache directory, or None (with one warning) when it is unsafe
    or read-only."""
    path = default_cache_dir()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = path.stat()
    except OSError as exc:
        _warn_once(f"mkdir:{path}", f"tracegrad: cannot create the kernel cache directory "
                                    f"{path} ({exc}); compiling without a disk cache")
        return None
    reason = unsafe_reason(st)
    if reason:
        _warn_once(f"unsafe:{path}", f"tracegrad: refusing to use the kernel cache directory "
                                     f"{path}: {reason}. Cached kernels are Python code that "
                                     "tracegrad imports; fix the directory's owner/mode or set "
                                     "TRACEGRAD_CACHE_DIR. Compiling without a disk cache.")
        return None
    if not os.access(path, os.W_OK | os.X_OK):
        _warn_once(f"ro:{path}", f"tracegrad: the kernel cache directory {path} is not "
                                 "writable; compiling without a disk cache")
        return None
    return path


def unsafe_reason(st: os.stat_result) -> str | None:
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def version_salt() -> str:
    from tracegrad.codegen.runtime import import_numba
    import_numba()
    import numba

    import tracegrad
    return f"tracegrad {tracegrad.__version__}; numba {numba.__version__}; python {sys.version_info[:2]}"


def content_hash(source_bytes: bytes) -> str:
    h = hashlib.sha256(source_bytes)
    h.update(b"\0" + version_salt().encode())
    return h.hexdigest()[:HASH_CHARS]


def module_name_for(source: str) -> str:
    return f"tg_{content_hash(source.encode())}"


def _write_once(path: Path, data: bytes) -> str:
    """Create `path` with `data` atomically. Returns "written" or "raced"."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".py", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path)          # atomic, and never replaces a finished file
            return "written"
        except FileExistsError:
            return "raced"
        except OSError:                 # no hard links here: rename instead
            if path.exists():
                return "raced"
            os.replace(tmp, path)
            return "written"
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def load_source(source: str) -> tuple[types.ModuleType, Path | None, str]:
    """Import generated `source`, through the disk cache when there is one.

    Returns (module, path or None, a few words on what happened for the log)."""
    data = source.encode()
    name = module_name_for(source)
    if name in sys.modules and getattr(sys.modules[name], "__tg_verified__", False):
        mod = sys.modules[name]
        return mod, Path(mod.__file__) if mod.__file__ else None, "already imported"
    directory = cache_dir()
    if directory is None:
        return _exec_module(name, source.replace("cache=True", "cache=False"), None), None, \
            "no usable cache dir: compiled in memory"
    path = directory / f"{name}.py"
    status = "file hit"
    for _attempt in range(3):
        try:
            existing = path.read_bytes()
        except FileNotFoundError:
            existing = None
        except OSError as exc:
            existing = None
            log.info("cache: cannot read %s (%s)", path, exc)
        if existing is not None and f"tg_{content_hash(existing)}" == name:
            with _LOCK:
                if name in sys.modules:
                    return sys.modules[name], path, "already imported"
                return _exec_module(name, existing.decode(), path), path, status
        if existing is not None:
            log.warning("tracegrad cache: %s is corrupt or truncated (hash mismatch); "
                        "rebuilding it", path)
            status = "miss (corrupt file rebuilt)"
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        else:
            status = "miss (new file)" if status == "file hit" else status
        try:
            _write_once(path, data)
        except OSError as exc:
            _warn_once(f"write:{directory}", f"tracegrad: cannot write to the kernel cache "
                                             f"{directory} ({exc}); compiling without a disk cache")
            return _exec_module(name, source.replace("cache=True", "cache=False"), None), None, \
                "cache write failed: compiled in memory"
        importlib.invalidate_caches()
    raise RuntimeError(f"tracegrad cache: {path} keeps failing its hash check")


def load_named(name: str) -> tuple[types.ModuleType | None, Path | None, str]:
    """Import the cached module `name` (from an index entry) if its file exists
    and its content still hashes to its name; (None, None, why) otherwise. Unlike
    `load_source`, a mismatch is not repaired here (the caller rebuilds the
    module from the graph, which rewrites a corrupt file)."""
    if not (name.startswith("tg_") and len(name) == 3 + HASH_CHARS
            and all(c in "0123456789abcdef" for c in name[3:])):
        return None, None, f"bad module name {name!r}"
    if name in sys.modules and getattr(sys.modules[name], "__tg_verified__", False):
        mod = sys.modules[name]
        return mod, Path(mod.__file__) if mod.__file__ else None, "already imported"
    directory = cache_dir()
    if directory is None:
        return None, None, "no usable cache dir"
    path = directory / f"{name}.py"
    try:
        existing = path.read_bytes()
    except OSError as exc:
        return None, None, f"module {path.name} unreadable ({type(exc).__name__})"
    if f"tg_{content_hash(existing)}" != name:
        return None, None, f"module {path.name} fails its hash check (stale or corrupt)"
    with _LOCK:
        if name in sys.modules:
            return sys.modules[name], path, "already imported"
        return _exec_module(name, existing.decode(), path), path, "file hit"


def _exec_module(name: str, text: str, path: Path | None) -> types.ModuleType:
    mod = types.ModuleType(name)
    mod.__file__ = str(path) if path is not None else None
    filename = str(path) if path is not None else f"<tracegrad {name}>"
    code = compile(text, filename, "exec")
    sys.modules[name] = mod  # before exec: Numba's cache unpickles references to it
    try:
        exec(code, mod.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    mod.__tg_verified__ = True
    return mod
