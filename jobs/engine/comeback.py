"""Which of the laptops that failed a deployment's jobs are back by the time recovery re-plans it.

The supervisor restarts a dead rpc-server within seconds (nodes/servers/supervisor.py), so by the time recovery plans,
the laptop of a killed server usually serves again: it keeps its place, and the model its layers where they
were. Not kept: a laptop that does not answer, one whose server the supervisor could not start, and one whose
server dies again within KEEP_AGAIN_AFTER_S of being kept (the kernel's out-of-memory kill is the same signal 9
as a kill by hand, and keeping such a laptop would fail every job that runs on it).
"""

import time

from models_app.models import Deployment
from nodes.models import RpcServer, ServerStatus
from nodes.remote import ssh
from nodes.servers import rpcserver

BACK_WITHIN_S = 10.0  # how long a re-plan waits for the supervisor to restart a dead laptop's rpc-server
KEEP_AGAIN_AFTER_S = 600.0
KEPT = "kept_after_failure"  # in the plan record: laptop name → when recovery last kept it (Unix time)


def back_again(deployment: Deployment, stages, dead: list[str]) -> list[str]:
    """Those of the dead laptops whose rpc-server is running again, a new one (not the process the engine
    loaded onto), now or within BACK_WITHIN_S."""
    loaded = deployment.engine.get("servers", {})
    waiting = {stage.node.name: stage for stage in stages
               if stage.node.name in dead and stage.server_id and not kept_lately(deployment, stage.node.name)}
    back, deadline = [], time.monotonic() + BACK_WITHIN_S
    while waiting:
        for name, stage in list(waiting.items()):
            verdict = running_again(stage, loaded.get(name))
            if verdict is not None:
                del waiting[name]
                if verdict:
                    back.append(name)
        if not waiting or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    return back


def running_again(stage, loaded_pid: int | None) -> bool | None:
    """True: the stage's laptop runs a new rpc-server, which the supervisor has started and reached; False: it
    will not come back soon; None: not yet."""
    server = RpcServer.objects.get(pk=stage.server_id)
    if not server.wanted or server.status == ServerStatus.FAILED:
        return False
    try:  # asked on the laptop too: the supervisor's row may not know yet that the server died
        state = rpcserver.state(stage.node.ssh_target(), stage.node.install_dir, server.port)
    except ssh.SSHError:
        return False
    started = server.status == ServerStatus.RUNNING and server.endpoint  # handshake made, tunnel open
    return True if started and state.running and state.pid == server.pid != loaded_pid else None


def kept_lately(deployment: Deployment, name: str) -> bool:
    return time.time() - deployment.plan.get(KEPT, {}).get(name, 0.0) < KEEP_AGAIN_AFTER_S


def remember(deployment: Deployment, record: dict, back: list[str]) -> dict:
    """`record` (the plan recovery goes on with) noting the laptops kept now, and those kept lately."""
    now = time.time()
    recent = {name: at for name, at in deployment.plan.get(KEPT, {}).items() if now - at < KEEP_AGAIN_AFTER_S}
    return {**record, KEPT: {**recent, **dict.fromkeys(back, now)}}


def in_words(deployment: Deployment, back: list[str], gone: list[str]) -> str:
    """What recovery kept and left out of the laptops that failed, in words, to follow "after lab-2 failed"."""
    words = ""
    if len(back) == 1:
        words += f"; {back[0]} kept its place: its rpc-server is running again"
    elif back:
        words += f"; {', '.join(back)} kept their places: their rpc-servers are running again"
    again = [name for name in gone if kept_lately(deployment, name)]
    if again:
        minutes = round(KEEP_AGAIN_AFTER_S / 60)
        words += (f"; {', '.join(again)} left out: its rpc-server died again within {minutes} minutes of being "
                  "kept (is the laptop running out of memory?)")
    return words
