"""The on-disk kernel cache: generated modules as real, verified .py files.

Why real files: Numba's `cache=True` finds its cache through the function's
source file, so code made with `exec` on a string can never be cached. Each
module is written once to `<cache dir>/tg_<hash>.py`, where the hash covers
the source text and the tracegrad and Numba versions, so:

  - the file is never rewritten. Creation is atomic: write a temp file in the
    same dir, then hard-link it into place (fails if another process won the
    race: its file is then used), or `os.replace` where links fail;
  - before import, the file's content is hashed again and compared with its
    name; a truncated or corrupted file is rebuilt. The verified bytes are the
    ones executed (no re-read between check and use);
  - the module is registered in `sys.modules` before its code runs, so Numba
    can unpickle references to it in a new process.

Numba's own cache files for these modules (pickles) never go through Numba's
stock loader: `numba_cache.py` gives every function of a module loaded here a
cache whose files are named by their sha256 and checked before unpickling,
in `<cache dir>/numba/`.

Trust model (README, "Who can write the cache"): the cache directory must be
a real directory (not a symlink) owned by this user and not writable by group
or others; otherwise there is no disk cache (one CacheWarning). It is resolved
once per process per value of TRACEGRAD_CACHE_DIR (a relative value is made
absolute at first use) and held open: every file is opened relative to that
directory handle with O_NOFOLLOW, so later renames or symlink flips of the path
do not redirect it. Only regular files are read (a FIFO, device or directory in
a file's place is skipped without being opened). Every directory tracegrad
creates is 0700 and every file 0600, whatever the umask.

    >>> import os; d = cache_dir()  # $TRACEGRAD_CACHE_DIR or ~/.cache/tracegrad
"""

from __future__ import annotations

import errno
import functools
import hashlib
import importlib
import logging
import os
import secrets
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
MAX_READ = 64 << 20  # bytes: no cache file of ours is near this; a bigger one is not read

_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_DIR_FD_OK = os.open in os.supports_dir_fd and _O_NOFOLLOW != 0


class CacheWarning(UserWarning):
    """The kernel cache directory cannot be used; kernels are compiled in memory."""


def _warn_once(key: str, message: str) -> None:
    with _LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    warnings.warn(message, CacheWarning, stacklevel=4)
    log.warning(message)


# ------------------------------------------------------------------ the directory

_ABSOLUTE: dict[str, Path | None] = {}  # spec -> absolute path, pinned at first use


def _spec() -> str:
    from tracegrad.config import cache_dir_spec

    return cache_dir_spec()


def default_cache_dir() -> Path | None:
    """The cache directory's absolute path: $TRACEGRAD_CACHE_DIR (a relative value
    is made absolute against the working directory of its first use, and stays
    so), else $XDG_CACHE_HOME/tracegrad, else ~/.cache/tracegrad; with no home
    directory at all (no HOME, no passwd entry), a per-user directory
    `tracegrad-<uid>` in the system temp dir. None: no usable path."""
    spec = _spec()
    with _LOCK:
        if spec in _ABSOLUTE:
            return _ABSOLUTE[spec]
    path = _compute_path(spec)
    with _LOCK:
        return _ABSOLUTE.setdefault(spec, path)


def _compute_path(spec: str) -> Path | None:
    if spec:
        expanded = os.path.expanduser(spec)
        if expanded.startswith("~"):  # no home to expand it against: never a dir named "~"
            return None
        return Path(os.path.abspath(expanded))
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):  # the XDG spec ignores relative values
        return Path(xdg) / "tracegrad"
    home = os.path.expanduser("~")
    if os.path.isabs(home):
        return Path(home) / ".cache" / "tracegrad"
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"tracegrad-{uid}"


class CacheDir:
    """An open, checked cache directory: `path` (for messages and file names
    shown to users) and `fd`, the handle every file operation goes through."""

    def __init__(self, path: Path, fd: int):
        self.path = path
        self.fd = fd
        self._subdirs: dict[str, CacheDir | None] = {}

    def subdir(self, name: str) -> CacheDir | None:
        """A private subdirectory (created 0700), or None (with one warning) if an
        existing one is not a directory of ours that only we can write."""
        with _LOCK:
            if name in self._subdirs:
                return self._subdirs[name]
        sub = None
        try:
            created = False
            try:
                os.mkdir(name, 0o700, dir_fd=self.fd)
                created = True
            except FileExistsError:
                pass
            fd = os.open(
                name, os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=self.fd
            )
            if created:
                os.fchmod(fd, 0o700)
            reason = unsafe_reason(os.fstat(fd))
            if reason:
                os.close(fd)
                _warn_once(
                    f"unsafe:{self.path / name}",
                    f"tracegrad: refusing to use {self.path / name}: {reason}; "
                    "Numba's cache for tracegrad kernels is off (kernels are compiled "
                    "in every process)",
                )
            else:
                sub = CacheDir(self.path / name, fd)
        except OSError as exc:
            _warn_once(
                f"sub:{self.path / name}",
                f"tracegrad: cannot use {self.path / name} ({exc}); Numba's cache for "
                "tracegrad kernels is off (kernels are compiled in every process)",
            )
        with _LOCK:
            if name in self._subdirs:  # another thread won: keep one handle
                if sub is not None:
                    os.close(sub.fd)
                return self._subdirs[name]
            self._subdirs[name] = sub
        return sub


_OPEN: dict[Path, CacheDir | None] = {}


def cache_dir() -> Path | None:
    """The usable cache directory's path, or None (with one warning) when it is
    unsafe, read-only or missing."""
    d = open_cache_dir()
    return d.path if d is not None else None


def open_cache_dir() -> CacheDir | None:
    """The cache directory, opened and checked once per process (per path)."""
    path = default_cache_dir()
    if path is None:
        _warn_once(
            "nohome",
            "tracegrad: TRACEGRAD_CACHE_DIR starts with '~' but there is "
            "no home directory to expand it against; compiling without a "
            "disk cache",
        )
        return None
    with _LOCK:
        if path in _OPEN:
            return _OPEN[path]
    d = _open_checked(path)
    with _LOCK:
        if path in _OPEN:
            if d is not None:
                os.close(d.fd)
            return _OPEN[path]
        _OPEN[path] = d
    return d


def _open_checked(path: Path) -> CacheDir | None:
    if not _DIR_FD_OK:
        _warn_once(
            f"nofd:{path}",
            "tracegrad: this platform cannot open files relative to a "
            "directory handle without following symlinks; compiling "
            "without a disk cache",
        )
        return None
    try:
        fd, created = _open_or_create(path)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and os.path.islink(path):
            _warn_once(
                f"unsafe:{path}",
                f"tracegrad: refusing to use the kernel cache "
                f"directory {path}: it is a symbolic link (the cache "
                "must be a real directory: cached kernels are code "
                "tracegrad runs). Compiling without a disk cache.",
            )
        else:
            _warn_once(
                f"mkdir:{path}",
                f"tracegrad: cannot create the kernel cache directory "
                f"{path} ({exc}); compiling without a disk cache",
            )
        return None
    st = os.fstat(fd)
    reason = unsafe_reason(st) if not created else None
    if reason:
        os.close(fd)
        _warn_once(
            f"unsafe:{path}",
            f"tracegrad: refusing to use the kernel cache directory "
            f"{path}: {reason}. Cached kernels are Python code that "
            "tracegrad imports; fix the directory's owner/mode or set "
            "TRACEGRAD_CACHE_DIR. Compiling without a disk cache.",
        )
        return None
    if not os.access(str(path), os.W_OK | os.X_OK):
        os.close(fd)
        _warn_once(
            f"ro:{path}",
            f"tracegrad: the kernel cache directory {path} is not "
            "writable; compiling without a disk cache",
        )
        return None
    return CacheDir(path, fd)


def _open_or_create(path: Path) -> tuple[int, bool]:
    """(fd, created): the directory opened with O_NOFOLLOW (a symlink as the last
    component fails), created 0700 with any missing parents first."""
    flags = os.O_RDONLY | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC
    try:
        return os.open(path, flags), False
    except FileNotFoundError:
        pass
    missing = []
    p = path
    while not os.path.lexists(p) and p != p.parent:
        missing.append(p)
        p = p.parent
    created = False
    for p in reversed(missing):
        try:
            os.mkdir(p, 0o700)
            created = p == path
            if p != path:
                os.chmod(p, 0o700, follow_symlinks=False)
        except FileExistsError:
            pass
    fd = os.open(path, flags)
    if created:
        os.fchmod(fd, 0o700)  # exact, whatever the umask
    return fd, created


def unsafe_reason(st: os.stat_result) -> str | None:
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if hasattr(os, "getuid") and st.st_uid != os.getuid():
        return f"it is owned by uid {st.st_uid}, not by this user (uid {os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"it is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


# ------------------------------------------------------------------ files


class NotAFile(OSError):
    """A cache file's name is taken by something that is not a regular file of ours."""


def read_file(d: CacheDir, name: str, limit: int = MAX_READ) -> bytes | None:
    """The bytes of regular file `name` in `d`, None if it does not exist. A FIFO,
    device, socket, directory or symlink in its place raises NotAFile without ever
    being opened; so does a file owned by someone else or larger than `limit`."""
    try:
        st = os.stat(name, dir_fd=d.fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not stat.S_ISREG(st.st_mode):
        raise NotAFile(f"{d.path / name} is not a regular file (mode {st.st_mode:o})")
    fd = os.open(name, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC, dir_fd=d.fd)
    try:
        st2 = os.fstat(fd)
        if not stat.S_ISREG(st2.st_mode) or (st2.st_dev, st2.st_ino) != (st.st_dev, st.st_ino):
            raise NotAFile(f"{d.path / name} changed while it was opened")
        if hasattr(os, "getuid") and st2.st_uid != os.getuid():
            raise NotAFile(f"{d.path / name} is owned by uid {st2.st_uid}")
        if st2.st_size > limit:
            raise NotAFile(f"{d.path / name} is larger than {limit} bytes")
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            if sum(map(len, chunks)) > limit:
                raise NotAFile(f"{d.path / name} is larger than {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)


def remove(d: CacheDir, name: str) -> None:
    """Remove `name` (a file, FIFO, device node or symlink; an empty directory) if it
    is there; never follows it."""
    try:
        os.unlink(name, dir_fd=d.fd)
    except FileNotFoundError:
        pass
    except (IsADirectoryError, PermissionError):
        try:
            os.rmdir(name, dir_fd=d.fd)
        except OSError as exc:
            log.info("cache: cannot remove %s (%s)", d.path / name, exc)
    except OSError as exc:
        log.info("cache: cannot remove %s (%s)", d.path / name, exc)


def write_file(
    d: CacheDir, name: str, data: bytes, replace: bool = False, sync: bool = False
) -> str:
    """Create `name` in `d` with `data` (mode 0600) atomically. Without `replace`
    an existing file is never touched. Returns "written" or "raced" (someone else's
    file is in place). OSError (no space, read-only...) propagates; no temp file
    is left behind."""
    tmp = f".tmp-{secrets.token_hex(8)}-{name}"
    fd = os.open(
        tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC, 0o600, dir_fd=d.fd
    )
    try:
        try:
            os.fchmod(fd, 0o600)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd)
            return "written"
        try:
            os.link(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd, follow_symlinks=False)
            return "written"
        except FileExistsError:
            return "raced"
        except OSError as exc:  # no hard links here: rename instead
            if exc.errno == errno.ENOSPC:
                raise
            try:
                os.stat(name, dir_fd=d.fd, follow_symlinks=False)
                return "raced"
            except FileNotFoundError:
                os.replace(tmp, name, src_dir_fd=d.fd, dst_dir_fd=d.fd)
                return "written"
    finally:
        try:
            os.unlink(tmp, dir_fd=d.fd)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.info("cache: cannot remove temp file %s (%s)", d.path / tmp, exc)


def _write_once(path: Path, data: bytes) -> str:
    """write_file into the (opened, checked) cache directory that holds `path`."""
    d = open_cache_dir()
    if d is None or Path(path).parent != d.path:
        raise ValueError(f"{path} is not in the cache directory")
    return write_file(d, Path(path).name, data, sync=True)


# ------------------------------------------------------------------ hashes and names


def version_salt() -> str:
    from tracegrad.runtime.numba_loader import import_numba

    import_numba()
    import numba

    from tracegrad.config import VERSION

    return (
        f"tracegrad {VERSION}; numba {numba.__version__}; python {sys.version_info[:2]}; "
        f"intrinsics {_intrinsics_hash()}"
    )


# Runtime modules the generated kernels import, whose code Numba compiles into each
# kernel's cached machine code (the cache index key covers them too: codegen/index.py).
KERNEL_RUNTIME_MODULES = ("intrinsics.py", "lapack.py")


@functools.lru_cache(maxsize=1)
def _intrinsics_hash() -> str:
    """A change to a KERNEL_RUNTIME_MODULES file (between two commits of one version,
    too) must not leave kernels built with the old one in use."""
    h = hashlib.sha256()
    for name in KERNEL_RUNTIME_MODULES:
        h.update(Path(__file__).with_name(name).read_bytes())
    return h.hexdigest()[:16]


def content_hash(source_bytes: bytes) -> str:
    h = hashlib.sha256(source_bytes)
    h.update(b"\0" + version_salt().encode())
    return h.hexdigest()[:HASH_CHARS]


def module_name_for(source: str) -> str:
    return f"tg_{content_hash(source.encode())}"


def is_module_name(name: str) -> bool:
    return (
        isinstance(name, str)
        and name.startswith("tg_")
        and len(name) == 3 + HASH_CHARS
        and all(c in "0123456789abcdef" for c in name[3:])
    )


# ------------------------------------------------------------------ loading


def load_source(source: str) -> tuple[types.ModuleType, Path | None, str]:
    """Import generated `source`, through the disk cache when there is one.

    Returns (module, path or None, a few words on what happened for the log)."""
    data = source.encode()
    name = module_name_for(source)
    d = open_cache_dir()
    if name in sys.modules and getattr(sys.modules[name], "__tg_verified__", False):
        mod = sys.modules[name]
        if d is None or not mod.__file__:
            return mod, Path(mod.__file__) if mod.__file__ else None, "already imported"
        # imported from another cache dir (TRACEGRAD_CACHE_DIR changed): put the
        # file here too, so that this directory's index entries can name it
        fname = f"{name}.py"
        try:
            os.stat(fname, dir_fd=d.fd, follow_symlinks=False)
        except FileNotFoundError:
            try:
                write_file(d, fname, data, sync=True)
            except OSError:
                return mod, Path(mod.__file__), "already imported"
        except OSError:
            return mod, Path(mod.__file__), "already imported"
        return mod, d.path / fname, "already imported"
    if d is None:
        return _import(name, source, None, None), None, "no usable cache dir: compiled in memory"
    fname = f"{name}.py"
    path = d.path / fname
    status = "file hit"
    for _attempt in range(3):
        try:
            existing = read_file(d, fname)
        except NotAFile as exc:
            log.warning("tracegrad cache: %s; removing it (never opened)", exc)
            status = "miss (non-file replaced)"
            remove(d, fname)
            existing = None
        except OSError as exc:
            existing = None
            log.info("cache: cannot read %s (%s)", path, exc)
        if existing is not None and f"tg_{content_hash(existing)}" == name:
            return _import(name, existing.decode(), path, d), path, status
        if existing is not None:
            log.warning(
                "tracegrad cache: %s is corrupt or truncated (hash mismatch); rebuilding it", path
            )
            status = "miss (corrupt file rebuilt)"
            remove(d, fname)
        elif status == "file hit":
            status = "miss (new file)"
        try:
            write_file(d, fname, data, sync=True)
        except OSError as exc:
            _warn_once(
                f"write:{d.path}",
                f"tracegrad: cannot write to the kernel cache "
                f"{d.path} ({exc}); compiling without a disk cache",
            )
            return _import(name, source, None, None), None, "cache write failed: compiled in memory"
        importlib.invalidate_caches()
    _warn_once(
        f"loop:{path}",
        f"tracegrad: {path} keeps failing its hash check; compiling "
        "that kernel without a disk cache",
    )
    return _import(name, source, None, None), None, "file keeps failing: compiled in memory"


def load_named(name: str) -> tuple[types.ModuleType | None, Path | None, str]:
    """Import the cached module `name` (from an index entry) if its file exists
    and its content still hashes to its name; (None, None, why) otherwise. Unlike
    `load_source`, a mismatch is not repaired here (the caller rebuilds the
    module from the graph, which rewrites a corrupt file)."""
    if not is_module_name(name):
        return None, None, f"bad module name {name!r}"
    if name in sys.modules and getattr(sys.modules[name], "__tg_verified__", False):
        mod = sys.modules[name]
        return mod, Path(mod.__file__) if mod.__file__ else None, "already imported"
    d = open_cache_dir()
    if d is None:
        return None, None, "no usable cache dir"
    fname = f"{name}.py"
    try:
        existing = read_file(d, fname)
    except OSError as exc:
        return None, None, f"module {fname} unreadable ({type(exc).__name__})"
    if existing is None:
        return None, None, f"module {fname} unreadable (FileNotFoundError)"
    if f"tg_{content_hash(existing)}" != name:
        return None, None, f"module {fname} fails its hash check (stale or corrupt)"
    return _import(name, existing.decode(), d.path / fname, d), d.path / fname, "file hit"


_LOADING: dict[str, threading.Event] = {}  # module name -> set when its import ends


def _import(name: str, text: str, path: Path | None, d: CacheDir | None) -> types.ModuleType:
    """Run a verified module once per process. No lock is held while its code runs
    (that is where Numba compiles): a second thread importing the same module
    waits for the first one's event, and imports it itself if the first failed."""
    while True:
        with _LOCK:
            mod = sys.modules.get(name)
            if mod is not None and getattr(mod, "__tg_verified__", False):
                return mod
            event = _LOADING.get(name)
            mine = event is None
            if mine:
                event = _LOADING[name] = threading.Event()
        if not mine:
            event.wait()
            continue
        try:
            return _exec_module(name, text, path, d)
        finally:
            with _LOCK:
                if _LOADING.get(name) is event:
                    del _LOADING[name]
            event.set()


def _exec_module(name: str, text: str, path: Path | None, d: CacheDir | None) -> types.ModuleType:
    from tracegrad.runtime import numba_cache

    source = text
    store = d.subdir("numba") if d is not None else None
    if store is None or not numba_cache.register(name, store):
        # Numba's stock cache would read and write pickles we have not checked: none at all
        text = text.replace("cache=True", "cache=False")
    mod = types.ModuleType(name)
    mod.__file__ = str(path) if path is not None else None
    filename = str(path) if path is not None else f"<tracegrad {name}>"
    code = compile(text, filename, "exec")
    sys.modules[name] = mod  # before exec: Numba's cache unpickles references to it
    try:
        exec(code, mod.__dict__)
    except BaseException:
        if sys.modules.get(name) is mod:
            del sys.modules[name]
        raise
    mod.__tg_source__ = source
    mod.__tg_verified__ = True
    return mod


def unload(name: str, blocking: bool = True) -> bool:
    """Forget generated module `name` (its last kernel is gone): it leaves
    sys.modules, and is run again (from the verified file) if it is needed again.
    With blocking=False (from a finalizer) returns False instead of waiting when
    the lock is taken, possibly by this very thread."""
    from tracegrad.runtime import numba_cache

    if not _LOCK.acquire(blocking=blocking):
        return False
    try:
        mod = sys.modules.get(name)
        if mod is not None and getattr(mod, "__tg_verified__", False) and name not in _LOADING:
            del sys.modules[name]
    finally:
        _LOCK.release()
    numba_cache.unregister(name)
    return True


def _after_fork_in_child() -> None:
    """Threads other than the forking one are gone: so are their imports in flight."""
    global _LOCK
    _LOCK = threading.Lock()
    _LOADING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
