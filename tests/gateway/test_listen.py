"""Why the gateway could not listen, in the operator's terms: real sockets."""

from __future__ import annotations

import socket

from gateway.listen import bind_error, cannot_listen


def test_a_taken_port_is_found_by_a_trial_bind_and_named_with_the_fix() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        exc = bind_error("127.0.0.1", port)
        assert exc is not None
        assert cannot_listen("127.0.0.1", exc) == (
            "the port is taken", "change gateway.port, or stop what uses it (another myclaw gateway?)")
    assert bind_error("127.0.0.1", port) is None  # the trial holds nothing


def test_a_host_of_another_machine_or_no_machine_is_named() -> None:
    exc = bind_error("192.0.2.7", 0)  # TEST-NET-1
    assert exc is not None
    assert cannot_listen("192.0.2.7", exc)[0] == "192.0.2.7 is not an address of this machine"
    exc = bind_error("no-such-host.invalid", 0)
    assert exc is not None
    what, fix = cannot_listen("no-such-host.invalid", exc)
    assert what.startswith("cannot resolve 'no-such-host.invalid'")
    assert fix == "set gateway.host to an address or a name this machine knows"
