"""Every trigger fires a flush, observable by listeners with its reason; nothing new is a no-op."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest
from support.chat_support import FakeClock, SummaryResponder, add_messages, make_config, make_engine
from support.fakeopenai import FakeOpenAI

from tui.chat.chat import ChatEngine
from tui.chat.events import FlushStarted, TriggerEvent, TriggerListenerEvent
from tui.chat.state import WorkspaceState

#: Today at 10:00 local: messages written by the tests carry today's real date.
T0 = datetime.now().astimezone().replace(hour=10, minute=0, second=0, microsecond=0)


@pytest.fixture
def responder() -> SummaryResponder:
    return SummaryResponder()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


@pytest.fixture
def engine(tmp_path: Path, server: FakeOpenAI, clock: FakeClock) -> Iterator[ChatEngine]:
    chat = make_engine(
        tmp_path,
        make_config(tmp_path, server, idle_minutes=5, blur_debounce_seconds=3, tick_seconds=0.05),
        clock,
    )
    yield chat
    chat.close()


@pytest.fixture
def heard(engine: ChatEngine) -> list[TriggerListenerEvent]:
    events: list[TriggerListenerEvent] = []
    engine.triggers.add_listener(events.append)
    return events


def finished(events: list[TriggerListenerEvent]) -> list[TriggerEvent]:
    return [e for e in events if isinstance(e, TriggerEvent)]


def session_with_messages(engine: ChatEngine, count: int = 2) -> str:
    session = engine.sessions.create().id
    add_messages(engine.sessions, session, count)
    return session


def test_listeners_see_start_and_outcome_with_reason(
    engine: ChatEngine, heard: list[TriggerListenerEvent]
) -> None:
    session = session_with_messages(engine)
    events = engine.triggers.manual(session)
    assert isinstance(heard[0], FlushStarted) and heard[0].session_id == session
    assert heard[1] is events[0]
    assert events[0].trigger == "manual" and events[0].reason == "flush now"
    assert events[0].outcome.status == "flushed" and events[0].outcome.messages == 2
    nothing = engine.triggers.manual(session)
    assert nothing[0].outcome.status == "nothing_new"
    assert nothing[0].outcome.summary == "nothing new to log"
    state = WorkspaceState(engine.memory.workspace).last_triggers()
    assert state["manual"]["status"] == "nothing_new"


def test_no_active_session_is_a_reported_no_op(
    engine: ChatEngine, heard: list[TriggerListenerEvent]
) -> None:
    events = engine.triggers.fire("background")
    assert events[0].outcome.status == "nothing_new" and events[0].session_id is None
    assert finished(heard) == events


def test_session_switch_flushes_the_previous_session(
    engine: ChatEngine, heard: list[TriggerListenerEvent], responder: SummaryResponder
) -> None:
    first = session_with_messages(engine)
    second = engine.sessions.create().id
    assert engine.triggers.switch_session(first) == []
    events = engine.triggers.switch_session(second)
    assert [(e.trigger, e.session_id) for e in events] == [("session_switch", first)]
    assert events[0].reason == f"switched to {second}"
    assert events[0].outcome.status == "flushed" and responder.count == 1
    assert engine.triggers.active_session_id == second


def test_session_end_and_app_quit(engine: ChatEngine, heard: list[TriggerListenerEvent]) -> None:
    one = session_with_messages(engine)
    two = session_with_messages(engine)
    engine.triggers.switch_session(one)  # no previous: nothing to flush
    ended = engine.triggers.end_session(one)
    assert ended[0].trigger == "session_end" and ended[0].outcome.status == "flushed"
    assert engine.triggers.active_session_id is None
    engine.triggers.switch_session(two)
    add_messages(engine.sessions, one, 2, start=3)
    quit_events = engine.triggers.app_quit()
    assert {(e.session_id, e.outcome.status) for e in quit_events} == {
        (one, "flushed"),
        (two, "flushed"),
    }
    assert all(e.trigger == "app_quit" and e.reason == "app quit" for e in quit_events)


def test_delete_flushes_first_then_moves_to_trash(
    engine: ChatEngine, heard: list[TriggerListenerEvent]
) -> None:
    session = session_with_messages(engine, 4)
    engine.triggers.switch_session(session)
    trash, event = engine.triggers.delete_session(session)
    assert event.trigger == "session_delete" and event.outcome.messages == 4
    assert trash.exists() and trash.parent.name == ".trash"
    assert not engine.sessions.exists(session) and engine.triggers.active_session_id is None
    assert "Summary number 1" in engine.memory.workspace.daily_log(date.today()).read_text()
    assert engine.sessions.restore(session).message_count == 4


def test_delete_with_the_model_down_keeps_the_transcript(tmp_path: Path) -> None:
    from tui.chat.sessions import UnloggedMessagesError

    unreachable = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "MEMDECK_MODEL": "m"}
    engine = make_engine(tmp_path, make_config(tmp_path, env=unreachable))
    session = session_with_messages(engine, 2)
    with pytest.raises(UnloggedMessagesError, match="2 messages") as refused:
        engine.triggers.delete_session(session)
    assert refused.value.outcome.status == "skipped"
    assert engine.sessions.exists(session)
    trash, event = engine.triggers.delete_session(session, force=True)
    assert event.outcome.status == "skipped"
    assert trash.exists() and "message 2" in trash.read_text()
    engine.close()


def test_delete_without_a_model_logs_the_conversation_first(tmp_path: Path) -> None:
    engine = make_engine(tmp_path, make_config(tmp_path))
    session = session_with_messages(engine, 2)
    trash, event = engine.triggers.delete_session(session)
    assert event.outcome.status == "flushed" and event.outcome.messages == 2
    assert trash.exists()
    assert "message 2" in engine.memory.workspace.daily_log(date.today()).read_text()
    engine.close()


def test_background_is_debounced(engine: ChatEngine, heard: list[TriggerListenerEvent]) -> None:
    session = session_with_messages(engine)
    triggers = engine.triggers
    triggers.switch_session(session)
    triggers.note_activity(session, now=T0)
    triggers.focus_lost(now=T0)
    assert triggers.tick(now=T0 + timedelta(seconds=1)) == []
    triggers.focus_gained()  # back before the debounce: nothing happens
    assert triggers.tick(now=T0 + timedelta(seconds=10)) == []
    triggers.focus_lost(now=T0 + timedelta(seconds=20))
    triggers.focus_lost(now=T0 + timedelta(seconds=21))  # repeated blur: still one
    events = triggers.tick(now=T0 + timedelta(seconds=24))
    assert [e.trigger for e in events] == ["background"]
    assert events[0].reason == "terminal unfocused for 4 s"
    assert events[0].outcome.status == "flushed"
    assert triggers.tick(now=T0 + timedelta(seconds=60)) == []


def test_background_disabled_by_config(tmp_path: Path, server: FakeOpenAI) -> None:
    config = make_config(tmp_path, server, flush_on_blur=False, idle_minutes=60)
    engine = make_engine(tmp_path, config, FakeClock(T0))
    engine.triggers.switch_session(session_with_messages(engine))
    engine.triggers.focus_lost(now=T0)
    assert engine.triggers.tick(now=T0 + timedelta(minutes=1)) == []
    engine.close()


def test_idle_fires_once_per_silence(engine: ChatEngine, heard: list[TriggerListenerEvent]) -> None:
    session = session_with_messages(engine)
    triggers = engine.triggers
    triggers.switch_session(session)
    triggers.note_activity(session, now=T0)
    assert triggers.tick(now=T0 + timedelta(minutes=4)) == []
    events = triggers.tick(now=T0 + timedelta(minutes=5, seconds=1))
    assert [(e.trigger, e.reason) for e in events] == [("idle", "no message for 5 min")]
    assert events[0].outcome.status == "flushed"
    assert triggers.tick(now=T0 + timedelta(minutes=20)) == []
    add_messages(engine.sessions, session, 2, start=3)
    triggers.note_activity(session, now=T0 + timedelta(minutes=30))
    later = triggers.tick(now=T0 + timedelta(minutes=36))
    assert later[0].trigger == "idle" and later[0].outcome.messages == 2


def test_day_change_while_running(engine: ChatEngine, heard: list[TriggerListenerEvent]) -> None:
    active = session_with_messages(engine)
    other = session_with_messages(engine)
    engine.triggers.switch_session(active)
    engine.triggers.note_activity(active, now=T0)
    midnight = T0.replace(hour=0, minute=0, second=30) + timedelta(days=1)
    fired = engine.triggers.tick(now=midnight)
    events = [e for e in fired if e.trigger == "day_change"]
    # 14 hours of silence also fire idle, a no-op now that the day change logged everything.
    assert [e.outcome.status for e in fired if e.trigger == "idle"] == ["nothing_new"]
    assert {(e.trigger, e.session_id) for e in events} == {
        ("day_change", active),
        ("day_change", other),
    }
    assert events[0].reason == f"day changed from {T0.date()} to {midnight.date()}"
    # The messages are logged under the day they were written on, not the new day.
    assert all(e.outcome.daily_log == f"memory/{date.today().isoformat()}.md" for e in events)
    assert WorkspaceState(engine.memory.workspace).last_active_date == midnight.date()
    assert engine.triggers.tick(now=midnight + timedelta(seconds=10)) == []


def test_day_change_at_startup(engine: ChatEngine, heard: list[TriggerListenerEvent]) -> None:
    state = WorkspaceState(engine.memory.workspace)
    assert engine.triggers.startup(now=T0) == []  # first run: just remembers today
    assert state.last_active_date == T0.date()
    session = session_with_messages(engine)
    logged = session_with_messages(engine)
    engine.triggers.manual(logged)
    next_day = T0 + timedelta(days=1)
    events = engine.triggers.startup(now=next_day)
    assert [(e.trigger, e.session_id) for e in events] == [("day_change", session)]
    assert events[0].reason == f"started on {next_day.date()}, last active {T0.date()}"
    assert state.last_active_date == next_day.date()
    assert engine.triggers.startup(now=next_day) == []


async def test_async_fire_and_timer_loop(
    engine: ChatEngine, heard: list[TriggerListenerEvent], clock: FakeClock
) -> None:
    session = session_with_messages(engine)
    events = await engine.triggers.afire("manual", session)
    assert events[0].outcome.status == "flushed"
    add_messages(engine.sessions, session, 2, start=3)
    engine.triggers.switch_session(session)
    engine.triggers.blur_debounce = timedelta(seconds=0.1)
    stop = asyncio.Event()
    loop_task = asyncio.create_task(engine.triggers.run(stop))
    engine.triggers.focus_lost()
    for _ in range(100):
        if any(e.trigger == "background" for e in finished(heard)):
            break
        clock.advance(seconds=0.05)
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.wait_for(loop_task, 5)
    background = [e for e in finished(heard) if e.trigger == "background"]
    assert len(background) == 1 and background[0].outcome.messages == 2


def test_a_failing_listener_does_not_stop_the_flush(engine: ChatEngine) -> None:
    def broken(event: object) -> None:
        raise RuntimeError("listener bug")

    remove = engine.triggers.add_listener(broken)
    session = session_with_messages(engine)
    assert engine.triggers.manual(session)[0].outcome.status == "flushed"
    remove()
