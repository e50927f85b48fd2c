from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gateway.datalock import AlreadyRunning, DataBusy, DataLock, GatewayLock, running_pid

REPO = Path(__file__).resolve().parents[2]


def test_many_share_it_and_one_alone_excludes_them(tmp_path: Path) -> None:
    a, b, alone = DataLock(tmp_path), DataLock(tmp_path), DataLock(tmp_path)
    a.share()
    b.share()  # two gateways' worth of readers-and-writers: fine
    with pytest.raises(DataBusy, match="is running"):
        alone.exclusive(by="`myclaw memory merge-identities`")
    a.release()
    b.release()
    b.release()  # safe twice
    alone.exclusive(by="`myclaw memory merge-identities`")
    with pytest.raises(DataBusy, match="merge-identities"):
        a.share()
    alone.release()
    a.share()
    a.release()


@contextmanager
def _held_by_another_process(statement: str, data: Path) -> Iterator[int]:
    """A process that takes a lock (``statement``, with ``data`` as ``d``)
    and is killed, as a crash would, when the block ends; yields its pid."""
    code = (
        "import sys, time; from pathlib import Path; from gateway.datalock import DataLock, GatewayLock; "
        f"d = Path(sys.argv[1]); {statement}; print('held', flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(data)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        yield proc.pid
    finally:
        proc.kill()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_holder_that_dies_leaves_no_lock(tmp_path: Path) -> None:
    with _held_by_another_process("lock = DataLock(d); lock.share()", tmp_path):
        with pytest.raises(DataBusy):
            DataLock(tmp_path).exclusive(by="test")
    lock = DataLock(tmp_path)
    lock.exclusive(by="test")  # the kernel let go of the dead gateway's lock
    lock.release()


def test_one_gateway_per_home_and_a_killed_one_leaves_no_lock(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with _held_by_another_process("lock = GatewayLock(d); lock.acquire()", data) as pid:
        assert running_pid(data) == pid
        with pytest.raises(AlreadyRunning, match=f"pid {pid}"):
            GatewayLock(data).acquire()
    assert running_pid(data) is None  # no stale lock after a crash
    mine = GatewayLock(data)
    mine.acquire()
    assert running_pid(data) == os.getpid()
    mine.release()
    assert running_pid(data) is None


def test_a_command_that_must_be_alone_names_the_running_gateways_pid(tmp_path: Path) -> None:
    # `myclaw restore` beside a gateway: the operator is told which process
    # to stop, as `memory forget` and a second gateway name it.
    data = tmp_path / "data"
    with _held_by_another_process("g = GatewayLock(d); g.acquire(); s = DataLock(d); s.share()", data) as pid:
        with pytest.raises(DataBusy, match=rf"the gateway \(pid {pid}\) is running on .*: stop it first"):
            DataLock(data).exclusive(by="`myclaw restore`")
    # `myclaw chat` or a `myclaw memory` command holds it shared, with no pid on record.
    with _held_by_another_process("s = DataLock(d); s.share()", data):
        with pytest.raises(DataBusy, match="`myclaw chat` or another myclaw command is running") as refused:
            DataLock(data).exclusive(by="`myclaw restore`")
        assert "pid" not in str(refused.value)


def test_running_pid_never_creates_the_file(tmp_path: Path) -> None:
    assert running_pid(tmp_path / "data") is None
    assert not (tmp_path / "data").exists()


def test_a_look_at_the_lock_is_not_taken_for_a_running_gateway(tmp_path: Path) -> None:
    # `myclaw doctor` asks running_pid while a gateway starts: its instant
    # shared lock must not make the start fail.
    import fcntl
    import threading
    import time

    data = tmp_path / "data"
    first = GatewayLock(data)
    first.acquire()
    first.release()  # the file exists; nobody holds it
    fd = os.open(data / "gateway.lock", os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_SH)  # what running_pid holds, held 50 ms

    def let_go() -> None:
        time.sleep(0.05)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    t = threading.Thread(target=let_go)
    t.start()
    lock = GatewayLock(data)
    lock.acquire()
    t.join()
    assert running_pid(data) == os.getpid()
    lock.release()


def test_the_data_folder_the_locks_make_is_owner_only(tmp_path: Path) -> None:
    import stat

    old = os.umask(0o022)
    try:
        gw = GatewayLock(tmp_path / "home" / "data")
        gw.acquire()
        gw.release()
        lock = DataLock(tmp_path / "home2" / "data")
        lock.share()
        lock.release()
    finally:
        os.umask(old)
    for d in ("home", "home/data", "home2", "home2/data"):
        assert stat.S_IMODE((tmp_path / d).stat().st_mode) == 0o700, d


def test_an_older_lock_file_left_readable_by_all_is_made_owner_only(tmp_path: Path) -> None:
    # Before the lock was created 0600 it was 0644 under the usual umask; an
    # upgrade keeps the file, so opening it puts its mode right (the pid it
    # holds is nobody else's business, as nothing in data/ is).
    import stat

    data, gateway = DataLock(tmp_path), GatewayLock(tmp_path)
    for path, take, release in ((data.path, lambda: data.exclusive("test"), data.release),
                                (data.path, data.share, data.release),
                                (gateway.path, gateway.acquire, gateway.release)):
        path.write_bytes(b"")
        path.chmod(0o644)
        take()
        release()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, take


def test_a_gateway_says_it_takes_erasure_requests_and_a_bare_lock_does_not(tmp_path: Path) -> None:
    """``myclaw memory forget`` asks a running gateway to erase only when its
    lock file says it takes such requests (an older gateway, or one not
    started yet, is not waited for); the pid is still read first."""
    from gateway.datalock import running_serves

    assert not running_serves(tmp_path, "erasures")  # none runs
    lock = GatewayLock(tmp_path)
    lock.acquire()
    try:
        assert not running_serves(tmp_path, "erasures")
        lock.serves("erasures")
        assert running_serves(tmp_path, "erasures") and not running_serves(tmp_path, "backups")
        assert running_pid(tmp_path) == os.getpid()
    finally:
        lock.release()
    assert not running_serves(tmp_path, "erasures")  # released: the words left behind mean nothing


def test_an_erasure_beside_another_erasure_is_told_so_not_of_a_chat(tmp_path: Path) -> None:
    from gateway.datalock import ChatLock, ChatRunning

    first = ChatLock(tmp_path)
    first.exclusive()
    try:
        with pytest.raises(ChatRunning) as refused:
            ChatLock(tmp_path).exclusive()
        said = str(refused.value)
        assert "another erasure" in said and "myclaw chat is running" not in said, said
    finally:
        first.release()
    chat = ChatLock(tmp_path)
    chat.share()
    try:
        with pytest.raises(ChatRunning, match="myclaw chat is running on this home"):
            ChatLock(tmp_path).exclusive()
    finally:
        chat.release()
    alone = ChatLock(tmp_path)
    alone.exclusive()  # neither left a lock behind
    alone.release()


def test_a_lock_the_file_system_refuses_keeps_no_descriptor_open(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """flock can fail for another reason than a holder (ENOLCK on a network
    mount): the error goes up, and the file it opened is closed."""
    import errno
    import fcntl

    from gateway.datalock import ChatLock

    def refuse(fd: int, op: int) -> None:
        raise OSError(errno.ENOLCK, "No locks available")

    made = ChatLock(tmp_path)
    made.share()  # the folder and its file exist before the count
    made.release()
    open_before = len(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(fcntl, "flock", refuse)
    for lock in (ChatLock(tmp_path).share, ChatLock(tmp_path).exclusive,
                 GatewayLock(tmp_path / "gw").acquire):
        with pytest.raises(OSError) as failed:
            lock()
        assert failed.value.errno == errno.ENOLCK
    assert len(os.listdir("/proc/self/fd")) == open_before


def test_a_chats_own_erasure_is_refused_beside_another_chat_and_keeps_its_share(tmp_path: Path) -> None:
    """`myclaw chat`'s own /forget all (ChatLock.erasing on the lock it
    holds shared): another chat on the home would write back what it holds
    of the user, so refused; alone, its share becomes exclusive for the
    erasure and shared again after it, so an erasure still sees a chat."""
    from gateway.datalock import ChatLock, ChatRunning

    mine, other = ChatLock(tmp_path), ChatLock(tmp_path)
    mine.share()
    other.share()
    try:
        with pytest.raises(ChatRunning, match="another myclaw chat is running on this home"), mine.erasing():
            raise AssertionError("erased beside another chat")
        other.release()
        with mine.erasing():
            with pytest.raises(ChatRunning, match="another erasure"):
                ChatLock(tmp_path).exclusive()
            refused = ChatLock(tmp_path)
            with pytest.raises(ChatRunning, match="an erasure"):
                refused.share()  # no chat starts mid-erasure
        with pytest.raises(ChatRunning, match="myclaw chat is running on this home"):
            ChatLock(tmp_path).exclusive()  # the chat's share is back
    finally:
        mine.release()
        other.release()


def test_the_gateways_erasure_takes_the_chat_lock_for_its_length_only(tmp_path: Path) -> None:
    from gateway.datalock import ChatLock, ChatRunning

    cli = ChatLock(tmp_path)
    cli.exclusive()  # `myclaw memory forget` erasing
    try:
        with pytest.raises(ChatRunning, match=r"erasure \(myclaw memory forget\) is running"), ChatLock(tmp_path).erasing():
            raise AssertionError("erased beside another erasure")
    finally:
        cli.release()
    guard = ChatLock(tmp_path)
    with guard.erasing():
        with pytest.raises(ChatRunning, match="an erasure"):
            ChatLock(tmp_path).share()
        with pytest.raises(ChatRunning, match="another erasure"):
            ChatLock(tmp_path).exclusive()
    chat = ChatLock(tmp_path)
    chat.share()  # let go after
    chat.release()


def test_the_gateways_erasures_at_once_do_not_refuse_each_other(tmp_path: Path) -> None:
    """Two users' ``/forget all`` confirmed at the same moment in one
    gateway: each took chat.lock through a descriptor of its own, and
    flock refuses a second descriptor even in the same process, so the
    second user was told a terminal chat or another erasure ran. The
    gateway's erasures hold it together; it goes once the last ends."""
    from gateway.datalock import ChatLock, ChatRunning, ErasureHold

    hold = ErasureHold(tmp_path)
    with hold.erasing():
        with hold.erasing():  # the second user's, under way beside the first
            with pytest.raises(ChatRunning):
                ChatLock(tmp_path).share()
        with pytest.raises(ChatRunning):  # the first still erasing: still no chat
            ChatLock(tmp_path).share()
        with pytest.raises(ChatRunning, match="another erasure"):
            ChatLock(tmp_path).exclusive()  # `myclaw memory forget` beside it
    chat = ChatLock(tmp_path)
    chat.share()  # let go after the last
    try:
        with pytest.raises(ChatRunning, match="myclaw chat is running"), hold.erasing():
            raise AssertionError("erased beside a chat")
    finally:
        chat.release()
    with hold.erasing():  # the refusal left nothing held
        pass
