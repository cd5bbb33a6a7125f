"""chatfold.compat.sawtooth's PostgresStorageAdapter against a real
PostgreSQL server, which the module starts itself (initdb and postgres on a
temporary directory, listening on 127.0.0.1 on a free port, trust auth; as
the ``nobody`` user when run as root, since PostgreSQL refuses root) and
stops at the end. Each test gets a database of its own.

The tests skip when no PostgreSQL binaries or no asyncpg are found; with
``CHATFOLD_REQUIRE_POSTGRES=1`` they fail instead (as CI should run them).
"""

import asyncio
import glob
import os
import pathlib
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid

import pytest
from test_compat_sawtooth import _session_round_trip

import chatfold.compat.sawtooth as compat
from chatfold.compat.sawtooth import NotSupportedError
from chatfold.compat.sawtooth.state import ArchivalMemory, EntityLedger, MemoryState
from chatfold.compat.sawtooth.storage.postgres_adapter import PostgresStorageAdapter

REQUIRED = os.environ.get("CHATFOLD_REQUIRE_POSTGRES") == "1"


def _unavailable(reason):
    if REQUIRED:
        pytest.fail(f"{reason}, and CHATFOLD_REQUIRE_POSTGRES=1 requires the Postgres tests")
    pytest.skip(reason)


def _bin_dir():
    """The directory holding initdb, pg_ctl and postgres, or None."""
    found = [shutil.which("initdb")] + sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    for initdb in filter(None, found):
        folder = pathlib.Path(initdb).resolve().parent
        if (folder / "postgres").exists():
            return folder
    return None


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server():
    """A PostgreSQL server of the module's own: its admin DSN (without the database)."""
    try:
        import asyncpg
    except ImportError:
        _unavailable("asyncpg is not installed")
    folder = _bin_dir()
    if folder is None:
        _unavailable("no PostgreSQL binaries (initdb, postgres)")
    # PostgreSQL refuses to run as root: as root, run it as nobody.
    as_user = {}
    root = tempfile.mkdtemp(prefix="chatfold-pg-")
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        os.chown(root, nobody.pw_uid, nobody.pw_gid)
        as_user = {"user": nobody.pw_uid, "group": nobody.pw_gid, "extra_groups": []}
    data = os.path.join(root, "data")
    env = {"PATH": os.environ.get("PATH", ""), "LC_ALL": "C", "LANG": "C"}
    log = open(os.path.join(root, "server.log"), "wb")
    proc = None
    try:
        subprocess.run(
            [folder / "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
            **as_user,
        )
        port = _free_port()
        proc = subprocess.Popen(
            [folder / "postgres", "-D", data, "-p", str(port), "-h", "127.0.0.1", "-k", "",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"],
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            **as_user,
        )
        admin = f"postgresql://postgres@127.0.0.1:{port}"

        async def ready():
            conn = await asyncpg.connect(f"{admin}/postgres", timeout=2)
            await conn.close()

        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError("postgres exited at start: " + pathlib.Path(root, "server.log").read_text())
            try:
                asyncio.run(ready())
                break
            except (OSError, asyncpg.PostgresError, asyncio.TimeoutError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield admin
    finally:
        if proc is not None:
            proc.send_signal(signal.SIGINT)  # a fast shutdown
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log.close()
        shutil.rmtree(root, ignore_errors=True)


def _admin(server, sql, *args, database="postgres", fetch=False):
    """Runs one statement on ``database`` (a fresh connection): its rows when ``fetch``."""
    import asyncpg

    async def run():
        conn = await asyncpg.connect(f"{server}/{database}")
        try:
            return await (conn.fetch(sql, *args) if fetch else conn.execute(sql, *args))
        finally:
            await conn.close()

    return asyncio.run(run())


@pytest.fixture
def db(server):
    """A database of the test's own: ``(dsn, query, adapter)``: ``query(sql,
    *args)`` gives its rows, ``adapter(**settings)`` makes a
    PostgresStorageAdapter on it, closed at the end whatever happens."""
    name = "t_" + uuid.uuid4().hex[:12]
    dsn = f"{server}/{name}"
    made = []

    def adapter(**settings):
        made.append(PostgresStorageAdapter(dsn, **settings))
        return made[-1]

    _admin(server, f"CREATE DATABASE {name}")
    try:
        yield dsn, lambda sql, *args: _admin(server, sql, *args, database=name, fetch=True), adapter
    finally:
        for a in made:
            asyncio.run(a.close())
        _admin(server, f"DROP DATABASE {name} WITH (FORCE)")


def _state(summary="The user deploys v2 on Friday.", turn="Ship it."):
    """A state with every tier filled, in sawtooth's dump format."""
    return MemoryState.model_validate(
        {
            "l0_system": {"content": "You are a release bot.", "token_count": 6},
            "l1_working": {
                "messages": [
                    {"role": "user", "content": turn, "id": "m1",
                     "timestamp": "2026-01-15T12:00:00+00:00", "token_count": 3},
                    {"role": "assistant", "content": "Done: /srv/app/v2.tar.gz", "id": "m2",
                     "timestamp": "2026-01-15T12:00:05+00:00", "token_count": 9},
                ],
                "token_count": 12,
            },
            "l1_5_entities": {"entities": {"artifact": ["/srv/app/v1.tar.gz", "/srv/app/v2.tar.gz"]}},
            "l2_archival": {"narrative": summary, "token_count": 7},
            "chatfold": {"version": 2, "summary": summary, "buffer": [{"role": "user", "content": turn}]},
        }
    )


def _tables(query):
    rows = query("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'")
    return sorted(r["table_name"] for r in rows)


def test_the_schema_is_created_on_first_use_without_l3(db):
    dsn, query, make = db
    adapter = make()
    assert _tables(query) == []  # constructing connects to nothing
    assert asyncio.run(adapter.load_state("nobody")) is None
    assert _tables(query) == ["sawtooth_pools", "sawtooth_sessions"]
    # L3 is not done: no pgvector extension, no vector table
    assert query("SELECT extname FROM pg_extension WHERE extname = 'vector'") == []
    # a second adapter on the same database finds the schema there
    other = make(min_pool_size=0, max_pool_size=1)
    asyncio.run(other.save_state("s", _state()))
    assert asyncio.run(adapter.load_state("s")) is not None


def test_adapters_that_start_together_bootstrap_the_schema_once(db):
    dsn, query, make = db
    adapters = [make(min_pool_size=1, max_pool_size=2) for _ in range(4)]

    async def all_at_once():
        await asyncio.gather(*(a.save_state(f"s{i}", _state(turn=f"turn {i}")) for i, a in enumerate(adapters)))

    asyncio.run(all_at_once())
    assert [r["session_id"] for r in query("SELECT session_id FROM sawtooth_sessions ORDER BY 1")] == [
        "s0", "s1", "s2", "s3"
    ]


def test_a_state_round_trips_whole(db):
    dsn, query, make = db
    adapter = make()
    original = _state()
    asyncio.run(adapter.save_state("s1", original))
    loaded = asyncio.run(adapter.load_state("s1"))
    assert loaded.model_dump(mode="json") == original.model_dump(mode="json")
    assert loaded.l2_archival.narrative == "The user deploys v2 on Friday."
    assert loaded.l1_5_entities.get_history("artifact") == ["/srv/app/v1.tar.gz", "/srv/app/v2.tar.gz"]
    assert [(m.role, m.content, m.id) for m in loaded.l1_working.messages] == [
        ("user", "Ship it.", "m1"),
        ("assistant", "Done: /srv/app/v2.tar.gz", "m2"),
    ]
    assert loaded.chatfold == original.chatfold
    # stored as a JSONB object (sawtooth's column), not a JSON string
    row = query(
        "SELECT state_payload->'l0_system'->>'content' AS l0, jsonb_typeof(state_payload) AS kind"
        " FROM sawtooth_sessions WHERE session_id = 's1'"
    )[0]
    assert (row["l0"], row["kind"]) == ("You are a release bot.", "object")


def test_a_save_overwrites_and_a_delete_forgets(db):
    dsn, query, make = db
    adapter = make()

    async def lifecycle():
        await adapter.save_state("s1", _state(summary="first"))
        await adapter.save_state("s2", _state(summary="other"))
        await adapter.save_state("s1", _state(summary="second"))
        assert (await adapter.load_state("s1")).l2_archival.narrative == "second"
        await adapter.delete_state("s1")
        assert await adapter.load_state("s1") is None
        await adapter.delete_state("s1")  # deleting a missing session is no error
        assert (await adapter.load_state("s2")).l2_archival.narrative == "other"

    asyncio.run(lifecycle())
    assert [r["session_id"] for r in query("SELECT session_id FROM sawtooth_sessions")] == ["s2"]


def test_a_row_that_is_not_a_state_is_an_error(db):
    dsn, query, make = db
    adapter = make()
    asyncio.run(adapter.load_state("bootstrap"))
    # sawtooth's L3 writes such a placeholder row for a session it never saved
    query("INSERT INTO sawtooth_sessions (session_id, state_payload) VALUES ('l3only', '{}'::jsonb)")
    with pytest.raises(ValueError):
        asyncio.run(adapter.load_state("l3only"))


def test_a_session_sawtooth_memory_saved_loads(db):
    theirs_state = pytest.importorskip("sawtooth_memory.state")
    dsn, query, make = db
    adapter = make()
    asyncio.run(adapter.load_state("bootstrap"))
    theirs = theirs_state.MemoryState(l0_system=theirs_state.SystemPrompt(content="Their prompt."))
    theirs.l1_working.append(theirs_state.Message(role="user", content="hello from sawtooth"))
    theirs.l2_archival.append_narrative("They met before.")
    # what sawtooth's own adapter writes
    query(
        "INSERT INTO sawtooth_sessions (session_id, state_payload) VALUES ('old', $1::jsonb)",
        theirs.model_dump_json(),
    )
    loaded = asyncio.run(adapter.load_state("old"))
    assert loaded.l0_system.content == "Their prompt."
    assert [m.content for m in loaded.l1_working.messages] == ["hello from sawtooth"]
    assert loaded.l2_archival.narrative == "They met before."


def test_a_pool_state_round_trips(db):
    dsn, _, make = db
    adapter = make()

    async def lifecycle():
        assert await adapter.load_pool_state("team") is None
        ledger = EntityLedger(entities={"txn_id": ["txn_1", "txn_2"]})
        await adapter.save_pool_state("team", ledger, ArchivalMemory(narrative="Node A summarized."))
        entities, archive = await adapter.load_pool_state("team")
        assert entities.get_history("txn_id") == ["txn_1", "txn_2"]
        assert entities.get_latest("txn_id") == "txn_2"
        assert archive.narrative == "Node A summarized."

    asyncio.run(lifecycle())


def test_the_vector_methods_are_l3_and_not_supported(db):
    dsn, query, make = db
    adapter = make()
    for call in [
        lambda: adapter.upsert_vector_chunk("s", "text", [0.1, 0.2]),
        lambda: adapter.upsert_vector_chunks_batch("s", [("text", [0.1, 0.2])]),
        lambda: adapter.search_similar("s", [0.1, 0.2], top_k=2),
        lambda: adapter.count_vector_chunks("s"),
    ]:
        with pytest.raises(NotSupportedError) as caught:
            asyncio.run(call())
        assert "L3" in caught.value.feature
    assert _tables(query) == []  # refused before touching the database


def test_fresh_event_loops_share_one_pool_and_close_releases_it(db, server):
    dsn, _, make = db
    name = dsn.rsplit("/", 1)[1]
    adapter = make(min_pool_size=1, max_pool_size=2)

    def connections():
        rows = _admin(server, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1", name, fetch=True)
        return rows[0]["n"]

    # the sync manager runs every storage call on a fresh loop (asyncio.run)
    for i in range(8):
        asyncio.run(adapter.save_state("s", _state(turn=f"turn {i}")))
        assert asyncio.run(adapter.load_state("s")).l1_working.messages[0].content == f"turn {i}"
    assert 1 <= connections() <= 2
    asyncio.run(adapter.close())
    deadline = time.monotonic() + 5
    while connections() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert connections() == 0
    asyncio.run(adapter.close())  # closing twice is fine
    # and the adapter starts again after a close
    assert asyncio.run(adapter.load_state("s")).l1_working.messages[0].content == "turn 7"
    asyncio.run(adapter.close())


def test_the_sync_manager_keeps_its_session_in_postgres(db):
    dsn, _, make = db
    adapter = make()
    _session_round_trip(adapter)


def test_the_async_manager_keeps_its_session_in_postgres(db):
    dsn, _, make = db
    adapter = make()
    config = compat.ContextManagerConfig(storage_adapter=adapter, session_id="a1")

    async def run():
        async with compat.ContextManager("You are brief.", config, enable_events=False) as m:
            await m.add_message("user", "remember /etc/app.conf")
            before = await m.build_prompt()
        async with compat.ContextManager("ignored", config, enable_events=False) as m:
            assert await m.build_prompt() == before

    asyncio.run(run())


def test_bad_settings_and_an_unreachable_server_are_clear_errors():
    with pytest.raises(ValueError):
        PostgresStorageAdapter("postgresql://127.0.0.1/db", min_pool_size=5, max_pool_size=2)
    with pytest.raises(ValueError):
        PostgresStorageAdapter("")
    pytest.importorskip("asyncpg")
    adapter = PostgresStorageAdapter(f"postgresql://postgres@127.0.0.1:{_free_port()}/db", min_pool_size=0)
    with pytest.raises(OSError):
        asyncio.run(adapter.load_state("s"))
    asyncio.run(adapter.close())


def test_an_adapter_dropped_unclosed_releases_its_thread_and_connections(db, server):
    import gc
    import threading

    dsn, _, _ = db
    name = dsn.rsplit("/", 1)[1]

    def ours():
        return [t for t in threading.enumerate() if t.name == "chatfold-postgres"]

    def connections():
        rows = _admin(server, "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = $1", name, fetch=True)
        return rows[0]["n"]

    before = len(ours())
    adapter = PostgresStorageAdapter(dsn, min_pool_size=1, max_pool_size=1)
    assert asyncio.run(adapter.load_state("s")) is None
    assert len(ours()) == before + 1 and connections() == 1
    del adapter
    gc.collect()
    deadline = time.monotonic() + 5
    while (len(ours()) > before or connections()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(ours()) == before and connections() == 0
