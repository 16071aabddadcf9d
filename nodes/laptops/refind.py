"""Finding laptops that came back at another address (DHCP gave them a new one) by the host key pinned when they
were added, without registering them again.

The admin gives a range; the panel asks each address's SSH server for its host key, many at once with a short
timeout (an address where nothing answers is no error), and a pinned key found at an address other than its
laptop's moves that laptop there: the same Node row, so its actions, metrics, servers and deployments' history
stay. It is probed again, its wanted rpc-servers restart at the new address, and the deployments holding it
recover as after a laptop drops (what follows is theirs to say: nodes/laptops/holds.py).

Not moved, and said why: a laptop that still answers with its key at its own address (a second network, or
a name that resolves there), a key found at two addresses, a key two laptops share (cloned images). A laptop
whose old address shows another key is not matched by that address at all: the host-key approval flow stays.
"""

import ipaddress
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from celery import shared_task
from django.db import transaction
from django.utils import timezone
from kombu.exceptions import OperationalError

from nodes.laptops import holds
from nodes.models import ActionKind, ActionStatus, LanScan, Node, NodeStatus
from nodes.remote import ssh
from nodes.tasks import enqueue

log = logging.getLogger(__name__)
MOST_ADDRESSES = 1024  # a /22: more than any lab's LAN segment, few enough to ask in seconds
AT_ONCE = 64  # connections open at once; each waits at most KEY_TIMEOUT_S
KEY_TIMEOUT_S = 2.0  # a laptop on the LAN answers in milliseconds; an empty address costs this much


class RangeRefused(ValueError):
    pass


def addresses(text: str, public: bool = False) -> list[str]:
    """The addresses of "192.168.1.0/24", "192.168.1.20-192.168.1.80" or one address, in order; RangeRefused in
    words for anything else, a range over MOST_ADDRESSES, or (unless `public`) one outside private, link-local
    and loopback space, where the panel would be probing other people's machines."""
    text = (text or "").strip()
    try:
        if "/" in text:
            network = ipaddress.ip_network(text, strict=False)
            found = list(network.hosts()) if network.num_addresses <= MOST_ADDRESSES + 2 else None
        elif "-" in text:
            first, last = (ipaddress.ip_address(part.strip()) for part in text.split("-", 1))
            if first.version != last.version or last < first:
                raise RangeRefused(f"{text!r}: the first address must come before the last, both IPv4 or both IPv6.")
            count = int(last) - int(first) + 1
            found = [first + step for step in range(count)] if count <= MOST_ADDRESSES else None
        else:
            found = [ipaddress.ip_address(text)]
    except ValueError as exc:
        if isinstance(exc, RangeRefused):
            raise
        raise RangeRefused(f"{text!r} is not a range: write it as 192.168.1.0/24, as 192.168.1.20-192.168.1.80, "
                           "or give one address.") from None
    if found is None:
        raise RangeRefused(f"{text} holds more than {MOST_ADDRESSES} addresses: give a smaller range (a /22 at most).")
    odd = next((a for a in found if a.is_multicast or a.is_reserved or a.is_unspecified), None)
    if odd is not None:
        raise RangeRefused(f"{odd} is no address a laptop can have (multicast, reserved or unspecified).")
    outside = next((a for a in found if not (a.is_private or a.is_link_local or a.is_loopback)), None)
    if outside is not None and not public:
        raise RangeRefused(f"{outside} is not a private, link-local or loopback address: a lab's LAN uses those. If "
                           "your laptops really sit on public addresses, allow public addresses explicitly.")
    return [str(address) for address in found]


def keys_at(where: list[str], port: int, prefer: str) -> dict[str, str]:
    """Address → the host key its SSH server on `port` presents, for every address that answered."""

    def key_of(address: str) -> str | None:
        try:
            return ssh.host_key_of(address, port, timeout=KEY_TIMEOUT_S, prefer=prefer)
        except ssh.SSHError:
            return None

    with ThreadPoolExecutor(max_workers=max(1, min(AT_ONCE, len(where)))) as pool:
        return {address: key for address, key in zip(where, pool.map(key_of, where), strict=True) if key}


@dataclass
class Findings:
    moved: list[dict] = field(default_factory=list)
    left: list[str] = field(default_factory=list)  # found elsewhere but not moved, each with why
    answered: int = 0

    def summary(self, scanned: int) -> str:
        said = [f"found {m['name']} at {m['host']} (was {m['was']})" + "".join(f"; {w}" for w in m["follows"])
                for m in self.moved]
        said += self.left
        if not said:
            said = [f"no laptop answered with a known key ({self.answered} of {scanned} addresses answered SSH)"]
        sentence = ". ".join(said) + "."
        return sentence[:1].upper() + sentence[1:]


def find(where: list[str], user=None, findings: Findings | None = None) -> Findings:
    """Ask every address in `where` for its host key, and move each laptop found at a new one (each move is
    written to `findings` as it is made, so a scan that fails later still says what it moved)."""
    findings, nodes = findings or Findings(), list(Node.objects.all())
    for port, kind in sorted({(node.port, key_kind(node)) for node in nodes}):
        keys = keys_at(where, port, kind)
        findings.answered = max(findings.answered, len(keys))
        for node in nodes:
            if (node.port, key_kind(node)) == (port, kind):
                match(node, [address for address, key in keys.items() if key == node.host_key], nodes, findings, user)
    return findings


def key_kind(node: Node) -> str:
    """"ssh-ed25519": a laptop with several host keys is asked for the kind the panel pinned."""
    return node.host_key.split()[0]


def match(node: Node, seen: list[str], nodes: list[Node], findings: Findings, user) -> None:
    if not seen or node.host in seen:
        return
    twins = [other.name for other in nodes if other.host_key == node.host_key and other.pk != node.pk]
    if twins:
        findings.left.append(f"{node.name}'s host key was found at {', '.join(seen)}, but {', '.join(twins)} "
                             "pinned the same key (a cloned image?): none of them was moved")
    elif len(seen) > 1:
        findings.left.append(f"{node.name} answers at {' and '.join(seen)}: give the one to keep by editing it")
    elif still_home(node):
        findings.left.append(f"{node.name} also answers at {seen[0]}, but still at {node.host} too: left there")
    else:
        findings.moved.append(move(node, seen[0], user))


def still_home(node: Node) -> bool:
    try:
        return ssh.host_key_of(node.host, node.port, timeout=KEY_TIMEOUT_S, prefer=key_kind(node)) == node.host_key
    except ssh.SSHError:
        return False


def move(node: Node, address: str, user=None) -> dict:
    """`node` now answers at `address` with its pinned key: the same laptop, moved there."""
    was, old = node.host, node.ssh_target()
    with transaction.atomic():
        Node.objects.filter(pk=node.pk).update(host=address)
        node.host = address
        follow_move(node, f"Found again at {address} (was {was}) by its host key; probing it there.", user)
        follows = holds.moved(node, was)
    ssh.forget(old)
    return {"name": node.name, "host": address, "was": was, "follows": follows}


def follow_move(node: Node, detail: str, user=None) -> None:
    """What a laptop at a new address needs (the address already saved): its servers restarted there, a probe."""
    if node.presented_host_key:  # what another machine showed at the old address is no question any more
        node.presented_host_key = ""
        node.save(update_fields=["presented_host_key"])
    node.set_status(NodeStatus.NEW, detail)
    node.rpc_servers.filter(wanted=True).update(restart_requested=True, next_try_at=None, failures=0)
    enqueue(node, ActionKind.PROBE, user)


def start(text: str, public: bool, user=None) -> LanScan:
    """A scan of the range, sent to a worker once committed; RangeRefused (nothing made) for a bad range."""
    addresses(text, public)
    scan = LanScan.objects.create(addresses=text.strip(), public=public, requested_by=user)
    transaction.on_commit(lambda: send(scan))
    return scan


def send(scan: LanScan) -> None:
    try:
        run.delay(scan.pk)
    except OperationalError as exc:  # the broker (Redis) is down: say so now rather than wait for a worker
        LanScan.objects.filter(pk=scan.pk, status=ActionStatus.QUEUED).update(
            status=ActionStatus.FAILED, finished=timezone.now(),
            error=f"No worker could be asked to run it (the panel's Redis did not answer: {exc}). Try again.")


@shared_task(acks_late=True)
def run(scan_id: int) -> None:
    """Claim the scan, run it, write what it found (a worker runs it; a scan already claimed is left alone)."""
    if not LanScan.objects.filter(pk=scan_id, status=ActionStatus.QUEUED).update(status=ActionStatus.RUNNING):
        return
    scan = LanScan.objects.get(pk=scan_id)
    findings = Findings()
    try:
        where = addresses(scan.addresses, scan.public)
        find(where, scan.requested_by, findings)
        scan.status, scan.summary = ActionStatus.SUCCEEDED, findings.summary(len(where))
    except Exception as exc:  # whatever it was, the scan must not stay running
        log.exception("%s failed", scan)
        done = "; ".join(f"{m['name']} to {m['host']} (was {m['was']})" for m in findings.moved)
        scan.status, scan.error = ActionStatus.FAILED, f"The scan failed: {str(exc).rstrip('.')}." + (
            f" Before that it moved {done}." if done else "")
    scan.moved = findings.moved
    scan.finished = timezone.now()
    scan.save(update_fields=["status", "summary", "moved", "error", "finished"])
