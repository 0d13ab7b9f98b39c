"""SQLite store in WAL mode; one transaction per result, so SIGKILL loses nothing committed."""

from __future__ import annotations

import functools
import json
import os
import pathlib
import sqlite3
import time
from typing import Any, Iterable, Optional

from envmatrix.errors import ConfigError
from envmatrix.results import ProbeResult, json_kind
from envmatrix.store.base import ResultStore, register_scheme

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sweeps (
    id TEXT PRIMARY KEY,
    created REAL NOT NULL,
    config_json TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    sweep_id TEXT,
    setup_name TEXT NOT NULL,
    grid TEXT NOT NULL,
    probe TEXT NOT NULL,
    backend TEXT NOT NULL,
    launcher TEXT NOT NULL,
    outcome TEXT NOT NULL,
    root_cause TEXT,
    started REAL NOT NULL,
    finished REAL NOT NULL,
    result_json TEXT NOT NULL,
    UNIQUE (run_key, attempt)
);
CREATE INDEX IF NOT EXISTS results_sweep ON results (sweep_id);
CREATE TABLE IF NOT EXISTS metrics (
    seq INTEGER NOT NULL REFERENCES results (seq),
    collective TEXT NOT NULL,
    size_bytes INTEGER NOT NULL,
    in_place INTEGER NOT NULL DEFAULT 0,
    busbw_gbps REAL,
    algbw_gbps REAL,
    time_us REAL,
    wrong INTEGER,
    row_json TEXT NOT NULL
);
"""


SQLITE_MAGIC = b"SQLite format 3\x00"


def sqlite_tables(path: str) -> Optional[frozenset[str]]:
    """The tables of an existing SQLite file, read without writing a byte (read-only and immutable: no WAL switch, no
    -wal/-shm files); None when the file is absent, empty or unreadable as SQLite. A store checks by it that a
    database holds its tables before adding them to someone else's file."""
    layout = sqlite_layout(path)
    return None if layout is None else frozenset(layout)


def sqlite_layout(path: str) -> Optional[dict[str, frozenset[str]]]:
    """``sqlite_tables`` with each table's columns, read the same way (nothing written)."""
    if not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None
    return _read_only(path, _layout)


def _read_only(path: str, read: Any) -> Any:
    """``read(db)`` of the file alone, without writing a byte (a WAL beside it is not read); None when unreadable."""
    try:
        db = sqlite3.connect(pathlib.Path(path).absolute().as_uri() + "?mode=ro&immutable=1", uri=True)
        try:
            return read(db)
        finally:
            db.close()
    except sqlite3.Error:
        return None


def damage_of(db: sqlite3.Connection) -> str:
    """SQLite's first complaint about the database's pages (quick_check: structure, not index contents); '' when
    sound. Damage that SQLite only raises about is returned as its message."""
    try:
        (first,) = db.execute("PRAGMA quick_check(1)").fetchone()
    except sqlite3.DatabaseError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise
        return str(exc)
    return "" if first == "ok" else " ".join(first.replace("*** in database main ***", "").split())


def _layout(db: sqlite3.Connection) -> dict[str, frozenset[str]]:
    """Each table (SQLite's own, such as sqlite_sequence, left out) with its columns."""
    query = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
    tables = [row[0] for row in db.execute(query)]
    return {t: frozenset(row[0] for row in db.execute("SELECT name FROM pragma_table_info(?)", (t,))) for t in tables}


@functools.lru_cache(maxsize=1)
def _store_layout() -> dict[str, frozenset[str]]:
    """The tables and columns _SCHEMA makes, read from an in-memory store (the schema text is the one source)."""
    db = sqlite3.connect(":memory:")
    try:
        db.executescript(_SCHEMA)
        return _layout(db)
    finally:
        db.close()


def corrupt(path: str, why: str) -> ConfigError:
    # readers (report, diff) take no --out: the advice names what every command can do
    return ConfigError(f"{path}: corrupt store ({why}); left untouched: move it away or use another run directory")


def _sweep_config(data: Any) -> dict[str, Any]:
    """A sweeps row's config as open_sweep wrote it: an object; its runs (a sweep's) a list of run keys, its setups an
    object by run key (what report and bisect --failing read of it)."""
    if not isinstance(data, dict):
        raise ValueError(f"it is a JSON {json_kind(data)}, not an object")
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(key, str) for key in runs):
        raise ValueError("its runs are not a list of run keys")
    if not isinstance(data.get("setups", {}), dict):
        raise ValueError("its setups are not an object")
    return data


def check_not_corrupt(path: str) -> None:
    """Refuse, before SQLite writes a byte, a store file that is not an SQLite database."""
    if path in ("", ":memory:") or not os.path.exists(path):
        return
    if os.path.isdir(path):
        raise ConfigError(f"{path}: is a directory, not a store file; remove it or pass another --out")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the store ({exc.strerror}); fix its permissions or pass another --out") from None
    if head and head != SQLITE_MAGIC:
        raise corrupt(path, "not an SQLite database")
    layout = sqlite_layout(path)
    if head and not os.path.exists(f"{path}-wal"):
        # with no WAL to replay the file is the whole store: unreadable or damaged pages (a copy cut short, a bad disk)
        # are refused before the lock file or anything else is written beside it
        damage = "unreadable as SQLite, truncated or damaged" if layout is None else _read_only(path, damage_of)
        if damage:
            raise corrupt(path, damage)
    ours = _store_layout()
    if layout and not set(layout) & set(ours):  # someone else's database: ours are not added to it
        raise corrupt(path, f"an SQLite database without envmatrix's tables; it holds {', '.join(sorted(layout)[:5])}")
    for table, columns in ours.items() if layout else ():
        # another layout: _SCHEMA's CREATE IF NOT EXISTS added the missing tables to the file, then failed on a column
        missing = sorted(columns - layout.get(table, frozenset()))
        if missing:
            lacks = f"table {table} lacks {', '.join(missing[:3])}" if table in layout else f"no table {table}"
            raise corrupt(path, f"not envmatrix's layout: {lacks}")


LOCK_WAIT_S = 30.0


def _when_unlocked(step: Any) -> Any:
    """Run ``step``, again while another process holds the lock, for up to LOCK_WAIT_S: switching a new file to WAL
    (and creating the tables) returns 'database is locked' at once, without SQLite's busy wait, when a peer opens the
    same new store at that moment, as the workers of a search fleet started together do (6 openers of one new file:
    26 of 180 failed)."""
    deadline = time.monotonic() + LOCK_WAIT_S
    while True:
        try:
            return step()
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _writable(path: str) -> bool:
    return os.access(path, os.W_OK) and os.access(os.path.dirname(os.path.abspath(path)), os.W_OK)


def _read_only_connection(path: str) -> sqlite3.Connection:
    """A store on read-only media (an archived run directory) or in someone else's directory, read as it is: opened
    read-write, SQLite could not make its -shm file there and it was called a 'corrupt store (unable to open database
    file)'. With no WAL beside it no writer has it open (a writer's connection keeps its WAL), so it is read
    immutable, which needs no -shm."""
    mode = "ro" if os.path.exists(f"{path}-wal") else "ro&immutable=1"
    db = sqlite3.connect(f"{pathlib.Path(path).absolute().as_uri()}?mode={mode}", uri=True, timeout=LOCK_WAIT_S,
                         isolation_level=None)
    try:
        db.execute("SELECT COUNT(*) FROM results").fetchone()
    except sqlite3.DatabaseError as exc:
        db.close()
        raise ConfigError(f"{path}: cannot read the store in a read-only place ({exc}); allowed: copy the run "
                          "directory somewhere writable") from None
    return db


@register_scheme("sqlite")
class SqliteStore(ResultStore):
    def __init__(self, path: str) -> None:
        self.path = path
        self._rows_checked = False
        check_not_corrupt(path)
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.read_only = os.path.isfile(path) and not _writable(path)
        if self.read_only:
            self.db = _read_only_connection(path)
            return
        self.db = sqlite3.connect(path, timeout=LOCK_WAIT_S, isolation_level=None)
        try:
            # before the first write: damaged pages found only by the first query were a traceback (exit 1) once
            # the sweep had opened the store, after the pool had started
            damage = _when_unlocked(lambda: damage_of(self.db))
            if damage:
                raise sqlite3.DatabaseError(damage)
            _when_unlocked(lambda: self.db.execute("PRAGMA journal_mode=WAL"))
            self.db.execute("PRAGMA synchronous=FULL")
            _when_unlocked(lambda: self.db.executescript(_SCHEMA))
        except sqlite3.DatabaseError as exc:
            self.db.close()
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            raise corrupt(path, str(exc)) from None

    @classmethod
    def from_url(cls, url: str) -> "SqliteStore":
        # SQLAlchemy's form: sqlite:///relative/path, sqlite:////absolute/path (paths.store_url writes the latter);
        # split at "://" it gave "//abs/path", the path every corrupt-store message then named
        if url.startswith("sqlite:///"):
            return cls(url[len("sqlite:///"):])
        return cls(url.split("://", 1)[1] if "://" in url else url)

    def _writing(self) -> None:
        if self.read_only:
            raise ConfigError(f"{self.path}: the store is read-only here; allowed: a writable run directory (--out)")
        self.check_rows()  # nothing is added to a store that every later read would refuse

    def check_rows(self) -> None:
        # what every reader decodes (each sweep, each run's newest attempt), decoded once per connection
        if not self._rows_checked:
            self.sweeps()
            self.latest()
            self._rows_checked = True

    def _decoded(self, blob: Any, build: Any, row: str) -> Any:
        """``build`` of a stored JSON column: the one place the store's rows are decoded. A row cut short, edited or
        of another layout is a one-line refusal naming the file and the row (exit 2), not a traceback."""
        try:
            return build(json.loads(blob))
        except (ValueError, TypeError) as exc:  # json's errors (and a bad UTF-8 blob's) are ValueErrors
            raise corrupt(self.path, f"{row} does not decode: {' '.join(str(exc).split())}") from None

    def open_sweep(self, sweep_id: str, config: dict[str, Any]) -> None:
        self._writing()
        self.db.execute(
            # a sweep resumed or rerun is the newest again (bisect --failing reads "the last sweep"), as last
            # configured (its id hashes the runs, not the setups' names)
            "INSERT INTO sweeps (id, created, config_json) VALUES (?, ?, ?)"
            " ON CONFLICT (id) DO UPDATE SET created = excluded.created, config_json = excluded.config_json",
            (sweep_id, time.time(), json.dumps(config, sort_keys=True, default=str)),
        )

    def completed_keys(self, run_keys: Iterable[str]) -> set[str]:
        keys = list(run_keys)
        done: set[str] = set()
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            marks = ",".join("?" * len(chunk))
            done.update(r[0] for r in self.db.execute(f"SELECT DISTINCT run_key FROM results WHERE run_key IN ({marks})", chunk))
        return done

    def put(self, result: ProbeResult) -> int:
        self._writing()
        cur = self.db.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            (attempt,) = cur.execute("SELECT COALESCE(MAX(attempt), 0) + 1 FROM results WHERE run_key = ?", (result.run_key,)).fetchone()
            cur.execute(
                "INSERT INTO results (run_key, attempt, sweep_id, setup_name, grid, probe, backend, launcher, outcome,"
                " root_cause, started, finished, result_json) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    result.run_key,
                    attempt,
                    result.sweep_id,
                    result.setup_name,
                    result.grid,
                    result.probe.get("name", "?"),
                    result.backend,
                    result.launcher,
                    result.outcome,
                    (result.root_cause or {}).get("line"),
                    result.started_at,
                    result.finished_at,
                    result.dumps(),
                ),
            )
            seq = cur.lastrowid
            for row in result.metrics:
                cur.execute(
                    "INSERT INTO metrics (seq, collective, size_bytes, in_place, busbw_gbps, algbw_gbps, time_us, wrong, row_json)"
                    " VALUES (?,?,?,?,?,?,?,?,?)",
                    (
                        seq,
                        row.get("collective"),
                        int(row.get("size_bytes", 0)),
                        int(bool(row.get("in_place"))),
                        row.get("busbw_gbps"),
                        row.get("algbw_gbps"),
                        row.get("time_us"),
                        row.get("wrong"),
                        json.dumps(row, sort_keys=True),
                    ),
                )
            cur.execute("COMMIT")
        except BaseException:
            cur.execute("ROLLBACK")
            raise
        return attempt

    def latest(self, run_keys: Optional[Iterable[str]] = None, sweep_id: Optional[str] = None) -> list[ProbeResult]:
        newest = "SELECT r.seq, r.result_json, r.run_key, r.attempt FROM results r JOIN (SELECT run_key, MAX(attempt) AS a" \
                 " FROM results{} GROUP BY run_key) m ON r.run_key = m.run_key AND r.attempt = m.a"
        if run_keys is None:
            rows = self.db.execute(newest.format("")).fetchall()
        else:
            # asked by key in SQL (the run_key index): a trial's reuse check read every result's JSON in the store,
            # 1.3 s per trial in a 6000-result store, each bisect probe and search trial once
            keys, rows = list(dict.fromkeys(run_keys)), []
            for i in range(0, len(keys), 500):
                chunk = keys[i : i + 500]
                rows += self.db.execute(newest.format(f" WHERE run_key IN ({','.join('?' * len(chunk))})"), chunk).fetchall()
        out = []
        for _, blob, key, attempt in sorted(rows):
            row = f"table results, run_key {key!r} attempt {attempt}: result_json"
            result = self._decoded(blob, ProbeResult.from_json, row)
            if sweep_id is not None and run_keys is None and result.sweep_id != sweep_id:
                continue
            out.append(result)
        return out

    def count(self, run_key: Optional[str] = None) -> int:
        if run_key is None:
            return self.db.execute("SELECT COUNT(*) FROM results").fetchone()[0]
        return self.db.execute("SELECT COUNT(*) FROM results WHERE run_key = ?", (run_key,)).fetchone()[0]

    def sweeps(self) -> list[dict[str, Any]]:
        return [
            {"id": i, "created": c, "config": self._decoded(j, _sweep_config, f"table sweeps, sweep {i!r}: config_json")}
            for i, c, j in self.db.execute("SELECT id, created, config_json FROM sweeps ORDER BY created").fetchall()
        ]

    def close(self) -> None:
        self.db.close()
