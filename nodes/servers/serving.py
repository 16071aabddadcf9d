"""What an admin asks of a laptop's rpc-servers, from a page or the API: start, stop or restart one (the
supervisor carries it out within seconds), and what stopping or restarting one would end."""

from nodes.laptops import holds
from nodes.models import Node, RpcServer

STATES = ("start", "stop", "restart")


class ServingError(ValueError):
    pass


def check_port(port) -> int:
    if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
        raise ServingError("The rpc-server port must be a number from 1024 to 65535.")
    return port


def want(node: Node, port: int, state: str) -> RpcServer:
    """Record what the admin wants of the server on `port` (made if new)."""
    check_port(port)
    if state not in STATES:
        raise ServingError(f"An rpc-server can be asked to {', '.join(STATES)}, not {state!r}.")
    wanted = state in ("start", "restart")
    server, _ = RpcServer.objects.get_or_create(node=node, port=port, defaults={"wanted": wanted})
    RpcServer.objects.filter(pk=server.pk).update(wanted=wanted, next_try_at=None, failures=0,
                                                  restart_requested=state == "restart")
    server.refresh_from_db()
    return server


def consequences(node: Node, port: int, state: str) -> list[str]:
    """What stopping or restarting a server ends: the deployment whose layers it holds, and its jobs."""
    server = RpcServer.objects.filter(node=node, port=port).first()
    losing = holds.losing(server) if server else None
    if losing is None:
        return [f"No running deployment uses it; it {'stops' if state == 'stop' else 'restarts'} within seconds."]
    return [f"{losing}; they fail naming {node.name} and are retried once after the deployment re-plans.",
            "Restarting brings the server back at once; the deployment then re-plans with it."
            if state == "restart" else "Stopped, it stays off until started again here."]
