"""chatfold.compat.sawtooth's Redis storage adapter against a real
redis-server (started and stopped here): a pool's shared ledger and archive
round-trip under sawtooth's key, the TTL is set with one (``SETEX``) and
absent without one (``SET``), and bad settings or stored values are clear
errors. The session round trip through the managers is in
test_compat_sawtooth.py.

The client lives on a loop of the adapter's own: calls from fresh event
loops share it and close() releases it.

Skipped without the redis package or redis-server; with
``CHATFOLD_REQUIRE_REDIS=1`` they fail instead.
"""

import asyncio
import time

import pytest

from chatfold.compat.sawtooth.state import ArchivalMemory, EntityLedger, MemoryState
from chatfold.compat.sawtooth.storage.redis_adapter import RedisStorageAdapter

@pytest.fixture
def make(redis_url):
    """``make(**settings)``: a RedisStorageAdapter on the server, closed at the end."""
    made = []

    def adapter(**settings):
        made.append(RedisStorageAdapter(redis_url, **settings))
        return made[-1]

    yield adapter
    for a in made:
        asyncio.run(a.close())


def _raw(url, command, *args):
    """One raw Redis command's answer."""
    import redis.asyncio

    async def run():
        client = redis.asyncio.from_url(url, decode_responses=True)
        try:
            return await client.execute_command(command, *args)
        finally:
            await client.aclose()

    return asyncio.run(run())


def test_a_pool_state_round_trips_under_sawtooths_key(redis_url, make):
    adapter = make(ttl_seconds=60)
    assert asyncio.run(adapter.load_pool_state("team")) is None
    ledger = EntityLedger(entities={"txn_id": ["txn_1", "txn_2"]})
    asyncio.run(adapter.save_pool_state("team", ledger, ArchivalMemory(narrative="Node A summarized.")))
    entities, archive = asyncio.run(adapter.load_pool_state("team"))
    assert entities.get_history("txn_id") == ["txn_1", "txn_2"]
    assert archive.narrative == "Node A summarized."
    assert 0 < _raw(redis_url, "TTL", "sawtooth:pool:team:shared") <= 60


def test_the_ttl_is_set_with_one_and_absent_without(redis_url, make):
    state = MemoryState.model_validate({"l0_system": {"content": "You are brief."}})
    for ttl, expected in [(120, range(1, 121)), (None, [-1]), (0, [-1])]:
        adapter = make(key_prefix=f"t{ttl}:", ttl_seconds=ttl)
        asyncio.run(adapter.save_state("s", state))
        assert _raw(redis_url, "TTL", f"t{ttl}:s:l1") in expected
        assert asyncio.run(adapter.load_state("s")).l0_system.content == "You are brief."


def test_bad_settings_and_bad_stored_values_are_errors(redis_url, make):
    for ttl in [-1, 1.5, "60", True]:
        with pytest.raises(ValueError):
            RedisStorageAdapter(redis_url, ttl_seconds=ttl)
    adapter = make()
    _raw(redis_url, "SET", "sawtooth:session:junk:l1", "{not json")
    _raw(redis_url, "SET", "sawtooth:pool:junk:shared", "[1, 2]")
    with pytest.raises(ValueError):
        asyncio.run(adapter.load_state("junk"))
    with pytest.raises(ValueError):
        asyncio.run(adapter.load_pool_state("junk"))


def test_fresh_event_loops_share_one_client_and_close_releases_it(redis_url, make):
    def others():
        # the clients connected now, less the one asking
        return len(_raw(redis_url, "CLIENT", "LIST").splitlines()) - 1

    baseline = others()
    adapter = make(key_prefix="loops:")
    state = MemoryState.model_validate({"l0_system": {"content": "You are brief."}})
    # the sync manager runs every storage call on a fresh loop (asyncio.run)
    for _ in range(8):
        asyncio.run(adapter.save_state("s", state))
        assert asyncio.run(adapter.load_state("s")) is not None
    assert others() == baseline + 1
    asyncio.run(adapter.close())
    deadline = time.monotonic() + 5
    while others() > baseline and time.monotonic() < deadline:
        time.sleep(0.05)
    assert others() == baseline
    asyncio.run(adapter.close())  # closing twice is fine
    assert asyncio.run(adapter.load_state("s")) is not None  # and it starts again
    asyncio.run(adapter.close())
