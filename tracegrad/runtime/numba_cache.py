"""Numba's disk cache for tracegrad's generated modules, without unverified pickles.

Numba caches a compiled function as two pickles next to its source file
(`__pycache__/<module>.<function>-<line>.pyXY.nbi` and `.nbc`), and loading
them runs whatever the pickles say. For the modules `cache.py` loads, this
module replaces that cache with one that unpickles nothing it did not check:

  - the data file (Numba's serialized compile result, a pickle) is named by
    the sha256 of its bytes: `<cache dir>/numba/<base>.<sha256[:32]>.nbc`;
  - the index is JSON, not a pickle: `<base>.<sha256(key)[:16]>.idx.json`
    maps one Numba cache key (signature, CPU, bytecode hash) to the data file
    and its full sha256, with Numba's version and the module's content hash;
  - a load reads the index (JSON, never executed), reads the data file once
    through the cache directory's handle (regular files only, O_NOFOLLOW), and
    unpickles those very bytes only if their sha256 is the recorded one;
    anything else (missing, truncated, edited, another version) is deleted
    and the function is compiled again, which writes fresh files;
  - a failed write (disk full, read-only) leaves the compiled function in
    memory with one CacheWarning; the kernel is as fast as ever;
  - a load (on the Numba versions in LIGHT_LOAD_NUMBA) skips what only a compile
    needs: Numba's refresh of its target context (`_runtime_symbols` adds the
    runtime's symbols instead) and the import of the modules of Numba's own
    implementations whose environments the compile result names (`_rebuild_env`).

Numba's stock cache never sees these modules: `Dispatcher.enable_caching` is
wrapped (once, when Numba is imported for kernels) to hand functions whose
module was registered here by `cache.py` (just before running the verified
module's code) to `VerifiedFunctionCache`; every other function keeps Numba's
own cache. If Numba's caching internals are not what this module expects,
`register` returns False and the module runs with `cache=False` instead.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import sys
import threading

log = logging.getLogger("tracegrad")

_MODULES: dict = {}  # module name -> CacheDir holding its Numba files
_LOCK = threading.Lock()
_INSTALLED: bool | None = None
FORMAT = 1


def register(module_name: str, store) -> bool:
    """Route the Numba cache of `module_name`'s functions to `store` (a
    cache.CacheDir). False if the hook cannot be installed (then the caller must
    not let Numba cache the module at all)."""
    if not install():
        return False
    with _LOCK:
        _MODULES[module_name] = store
    return True


def unregister(module_name: str) -> None:
    # no lock: called from finalizers (which may run while this thread holds _LOCK);
    # one dict.pop is atomic, and no code iterates _MODULES
    _MODULES.pop(module_name, None)


def install() -> bool:
    global _INSTALLED
    if _INSTALLED is not None:
        return _INSTALLED
    with _LOCK:
        if _INSTALLED is not None:
            return _INSTALLED
        try:
            _define_classes()
            from numba.core.dispatcher import Dispatcher

            original = Dispatcher.enable_caching

            def enable_caching(self, _original=original):
                store = _MODULES.get(getattr(self.py_func, "__module__", None))
                if store is None:
                    return _original(self)
                self._cache = VerifiedFunctionCache(self.py_func, store)

            enable_caching.__wrapped__ = original
            Dispatcher.enable_caching = enable_caching
            _INSTALLED = True
        except (
            Exception
        ) as exc:  # another Numba: no disk cache for kernels rather than an unchecked one
            log.warning(
                "tracegrad: cannot install the verified Numba cache (%s: %s); kernels "
                "are compiled in every process",
                type(exc).__name__,
                exc,
            )
            _INSTALLED = False
    return _INSTALLED


VerifiedFunctionCache = None


def _define_classes() -> None:
    global VerifiedFunctionCache
    if VerifiedFunctionCache is not None:
        return
    import numba
    from numba.core import caching
    from numba.core.serialize import dumps

    from tracegrad.runtime import cache

    class _Locator(caching._CacheLocator):
        """Where and against what: the verified module's own content hash is its
        source stamp (no re-read of the file by path)."""

        def __init__(self, py_func, store):
            self._py_file = py_func.__code__.co_filename
            self._lineno = py_func.__code__.co_firstlineno
            self._store = store
            self._stamp = py_func.__module__

        def ensure_cache_path(self):
            pass  # the directory is open and checked already

        def get_cache_path(self):
            return str(self._store.path)

        def get_source_stamp(self):
            return self._stamp

        def get_disambiguator(self):
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func, py_file):
            return None  # never chosen by Numba's own locator search

    class _Impl(caching.CompileResultCacheImpl):
        def __init__(self, py_func, store):  # super().__init__ would search locators
            self._lineno = py_func.__code__.co_firstlineno
            self._locator = _Locator(py_func, store)
            fullname = f"{py_func.__module__}.{py_func.__qualname__}"
            self._filename_base = self.get_filename_base(fullname, getattr(sys, "abiflags", ""))

    class _VerifiedFunctionCache(caching.FunctionCache):
        def __init__(self, py_func, store):  # no stock IndexDataCacheFile
            self._name = repr(py_func)
            self._py_func = py_func
            self._impl = _Impl(py_func, store)
            self._cache_path = str(store.path)
            self._cache_file = VerifiedCacheFile(
                store, self._impl.filename_base, self._impl.locator.get_source_stamp()
            )
            self.enable()

        def load_overload(self, sig, target_context):
            # Numba's FunctionCache.load_overload refreshes the target context first:
            # imports and installs every typing and lowering registry (~0.1-0.25 s, the
            # largest part of a warm process's wait for its kernel after Numba's import).
            # Rebuilding a compiled result needs none of them: its object code calls
            # only the symbols the runtime registers (`_runtime_symbols`). A miss
            # returns None and the dispatcher compiles, which refreshes then.
            guard = getattr(self, "_guard_against_spurious_io_errors", None)
            if guard is None or not _runtime_symbols(target_context):
                return super().load_overload(sig, target_context)  # Numba's own, refreshing
            with guard():
                return self._load_overload(sig, target_context)

        def _load_overload(self, sig, target_context):
            if not self._enabled:
                return None
            key = self._index_key(sig, target_context.codegen())
            data = self._cache_file.load(key)
            if data is None:
                return None
            try:
                return self._impl.rebuild(target_context, data)
            except Exception:  # (not expected) rebuild once more after Numba's full refresh
                pass
            try:
                target_context.refresh()
                return self._impl.rebuild(target_context, data)
            except Exception as exc:  # verified bytes Numba cannot use: compile instead
                log.warning(
                    "tracegrad cache: Numba could not rebuild %s from its cache (%s: "
                    "%s); compiling it again",
                    self._name,
                    type(exc).__name__,
                    exc,
                )
                self._cache_file.forget(key)
                return None

    class VerifiedCacheFile:
        def __init__(self, store, filename_base, stamp):
            self._store = store
            self._base = filename_base
            self._stamp = stamp
            self._data_re = re.compile(re.escape(filename_base) + r"\.([0-9a-f]{32})\.nbc")

        def _key_text(self, key) -> str:
            return repr(key)

        def _index_name(self, text: str) -> str:
            return f"{self._base}.{hashlib.sha256(text.encode()).hexdigest()[:16]}.idx.json"

        def flush(self):
            pass  # entries are per key; a changed module has another name (its hash)

        def forget(self, key) -> None:
            text = self._key_text(key)
            cache.remove(self._store, self._index_name(text))

        def load(self, key):
            text = self._key_text(key)
            index_name = self._index_name(text)
            try:
                raw = cache.read_file(self._store, index_name, limit=1 << 16)
            except OSError as exc:
                log.warning("tracegrad cache: %s; removing it", exc)
                cache.remove(self._store, index_name)
                return None
            if raw is None:
                return None
            entry = self._check_entry(raw, text)
            if entry is None:
                log.warning(
                    "tracegrad cache: Numba cache entry %s is corrupt, stale or not "
                    "ours; removing it",
                    self._store.path / index_name,
                )
                cache.remove(self._store, index_name)
                return None
            data_name, digest = entry
            try:
                payload = cache.read_file(self._store, data_name)
            except OSError as exc:
                payload, why = None, str(exc)
            else:
                why = "missing"
            if payload is not None and hashlib.sha256(payload).hexdigest() == digest:
                _symbols_for(payload)
                return _Unpickler(payload).load()  # exactly the bytes just checked
            if payload is not None:
                why = "hash mismatch (truncated or edited)"
            log.warning(
                "tracegrad cache: Numba cache file %s %s; removing it and compiling again",
                self._store.path / data_name,
                why,
            )
            cache.remove(self._store, data_name)
            cache.remove(self._store, index_name)
            return None

        def _check_entry(self, raw: bytes, text: str):
            try:
                entry = json.loads(raw.decode())
                ok = (
                    isinstance(entry, dict)
                    and entry.get("format") == FORMAT
                    and entry.get("numba") == numba.__version__
                    and entry.get("stamp") == self._stamp
                    and entry.get("key") == text
                )
                data_name, digest = entry["data"], entry["sha256"]
            except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError):
                return None
            if not ok or not isinstance(data_name, str) or not isinstance(digest, str):
                return None
            m = self._data_re.fullmatch(data_name)
            if (
                m is None
                or not re.fullmatch(r"[0-9a-f]{64}", digest)
                or not digest.startswith(m.group(1))
            ):
                return None
            return data_name, digest

        def save(self, key, data):
            payload = dumps(data)
            digest = hashlib.sha256(payload).hexdigest()
            data_name = f"{self._base}.{digest[:32]}.nbc"
            text = self._key_text(key)
            entry = json.dumps(
                {
                    "format": FORMAT,
                    "numba": numba.__version__,
                    "stamp": self._stamp,
                    "key": text,
                    "data": data_name,
                    "sha256": digest,
                }
            )
            try:
                cache.write_file(self._store, data_name, payload, replace=True)
                cache.write_file(self._store, self._index_name(text), entry.encode(), replace=True)
            except OSError as exc:
                cache._warn_once(
                    f"numba-write:{self._store.path}",
                    f"tracegrad: cannot write Numba's cache in {self._store.path} "
                    f"({exc}); the kernel is compiled in memory and is compiled "
                    "again in the next process",
                )

    import io
    import pickle

    from numba.core import environment

    def _rebuild_env(modname, consts, env_name):
        """numba.core.environment._rebuild_env without importing a Numba module for its
        globals: the environment of one of Numba's own implementations (np.empty's in
        numba.np.arrayobj, whose import pulls Numba's unicode and hashing support: ~0.1 s
        of a warm process) gets a globals dict holding only its name. Nopython code reads
        an environment's consts (restored here as by Numba), never its globals: only
        object-mode lowering does (pylowering). Every other module (the generated one,
        already imported; a user's) goes through Numba's own."""
        if (
            not isinstance(modname, str)
            or not modname.startswith("numba.")
            or modname in sys.modules
            or _light_envs is False
        ):
            return environment._rebuild_env(modname, consts, env_name)
        env = environment.lookup_environment(env_name)
        if env is not None:
            return env
        env = environment.Environment({"__name__": modname})
        env.consts[:] = consts
        env.env_name = env_name
        environment.Environment._memo[env_name] = env
        return env

    class _Unpickler(pickle.Unpickler):
        def __init__(self, payload: bytes):
            super().__init__(io.BytesIO(payload))

        def find_class(self, module, name):
            if module == "numba.core.environment" and name == "_rebuild_env":
                return _rebuild_env
            return super().find_class(module, name)

    _light_envs = hasattr(environment, "lookup_environment") and hasattr(
        environment.Environment, "_memo"
    )
    VerifiedFunctionCache = _VerifiedFunctionCache


# Numba versions (major, minor) whose symbol registrations were read for the load
# without refresh: `grep -rn "add_symbol" numba/` lists every module that adds to LLVM's
# symbol table; those that only Numba's refresh imports must be in _REFRESH_SYMBOLS (an
# unresolved symbol aborts the process). Other versions load with Numba's refresh.
LIGHT_LOAD_NUMBA = ((0, 68),)


def _runtime_symbols(target_context) -> bool:
    """What a cached compile result's object code links against, without Numba's full
    refresh: Numba's C helpers, CPython's exceptions and the C math functions are in
    LLVM's symbol table once the CPU context exists (BaseContext/CPUContext init); the
    runtime's (NRT: allocation, reference counts) are added here, as refresh does
    first; a parallel kernel's threading layer by its own reload_init when rebuilt;
    tracegrad's BLAS/LAPACK entry points when the generated module imports
    runtime.intrinsics / runtime.lapack; and `_symbols_for` adds the rest. False (the
    caller refreshes) for a Numba version not in LIGHT_LOAD_NUMBA."""
    import numba

    if tuple(int(p) for p in numba.__version__.split(".")[:2]) not in LIGHT_LOAD_NUMBA:
        return False
    from numba.core.runtime.nrt import rtsys

    rtsys.initialize(target_context)
    return True


# symbols that only a module imported by Numba's refresh adds to LLVM's table: the
# name in a compile result's object code -> the module that registers it at import
_REFRESH_SYMBOLS = {b"_numba_hashsecret_": "numba.cpython.hashing"}


def _symbols_for(payload: bytes) -> None:
    """Import the modules whose symbols the compile result `payload` (its pickle, which
    holds the object code as plain bytes) links against, before LLVM resolves them (an
    unresolved symbol aborts the process)."""
    import importlib

    for name, module in _REFRESH_SYMBOLS.items():
        if module not in sys.modules and name in payload:
            importlib.import_module(module)


def _after_fork_in_child() -> None:
    global _LOCK
    _LOCK = threading.Lock()


import os as _os  # noqa: E402

if hasattr(_os, "register_at_fork"):
    _os.register_at_fork(after_in_child=_after_fork_in_child)
