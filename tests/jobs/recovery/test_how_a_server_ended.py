"""What a job a laptop's death failed says of the laptop's rpc-server: its own last words from its log, or, where
the supervisor had already restarted it (the old log moved aside, the new one no server's yet), what the
supervisor read of them a moment before; never an old death's."""

from datetime import timedelta

from django.utils import timezone

from jobs.engine.recovery import SUPERVISOR_SAW_S, ended_how
from nodes.models import RpcServer
from nodes.servers.rpcserver import EXITED, ServerState

KILLED = "killed (signal 9): by hand, or by the kernel when the laptop ran out of memory"
RESTARTING = ServerState(False, None, "awake by systemd-inhibit")  # the new log, its server not up yet


def seen(seconds_ago: float) -> RpcServer:
    return RpcServer(last_death=f"{KILLED}\n\n{EXITED}137",
                     last_death_at=timezone.now() - timedelta(seconds=seconds_ago))


def test_a_restarted_servers_death_is_told_as_the_supervisor_read_it():
    assert ended_how(seen(2), RESTARTING) == KILLED


def test_its_own_last_words_come_first_and_an_old_death_is_not_this_one():
    assert ended_how(seen(2), ServerState(False, None, f"{EXITED}1")) == "exited with status 1"
    assert "no exit status recorded" in ended_how(seen(SUPERVISOR_SAW_S + 5), RESTARTING)
    assert "no exit status recorded" in ended_how(RpcServer(), RESTARTING)
