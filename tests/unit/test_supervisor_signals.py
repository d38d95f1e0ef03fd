"""The supervisor's signal handler only notes a signal; what it asks (say the run is stopping,
kill the runners on a second one) happens when the main loop answers, outside the handler,
where a print cannot re-enter the print a signal interrupted."""

from __future__ import annotations

import os
import signal

from clavain.stop_flag import StopFlag
from clavain.supervisor.signals import Signals


def test_the_handler_only_notes_and_the_loop_answers_once_per_signal() -> None:
    calls: list[str] = []
    stop = StopFlag()
    signals = Signals(stop, on_first=lambda: calls.append("first"),
                      on_again=lambda: calls.append("again"))
    with signals:
        os.kill(os.getpid(), signal.SIGINT)  # handled before the next line runs
        assert stop.is_set() and signals.first == signal.SIGINT and calls == []
        signals.answer()
        signals.answer()  # nothing new: nothing done
        assert calls == ["first"]
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGINT)
        assert calls == ["first"]  # still nothing from inside the handler
        signals.answer()  # two more since the last answer: no more grace, once
        assert calls == ["first", "again"] and signals.first == signal.SIGINT
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # given back


def test_two_signals_before_the_first_answer_ask_both() -> None:
    calls: list[str] = []
    signals = Signals(StopFlag(), on_first=lambda: calls.append("first"),
                      on_again=lambda: calls.append("again"))
    with signals:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        signals.answer()
    assert calls == ["first", "again"] and signals.first == signal.SIGTERM


def test_a_signal_in_the_run_s_last_steps_is_answered_on_leaving() -> None:
    """A Ctrl-C after the main loop's last turn (the run settling its claims) still stops the
    runners: leaving the block answers what came, then gives the handlers back."""
    calls: list[str] = []
    with Signals(StopFlag(), on_first=lambda: calls.append("first"),
                 on_again=lambda: calls.append("again")) as signals:
        signals.answer()
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert calls == []
    assert calls == ["first", "again"]
