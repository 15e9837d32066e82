"""Stopping a fit: the first SIGINT asks the loop to stop; a signal the process was started ignoring stays ignored."""

import os
import signal

from rff_field.common.stopping import fit_stops


def test_the_first_ctrl_c_asks_the_loop_to_stop_and_the_handler_is_restored():
    before = signal.getsignal(signal.SIGINT)
    with fit_stops(10, None, None) as stops:
        os.kill(os.getpid(), signal.SIGINT)
        assert stops.pressed
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_ignored_from_the_start_stays_ignored():
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a shell starts its background jobs
    try:
        with fit_stops(10, None, None) as stops:
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            assert not stops.pressed
        assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
