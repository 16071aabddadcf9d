"""Adding a laptop: pin its host key, make sure the panel can log in, and only then save it."""

from django.core.exceptions import ValidationError
from django.db import transaction
from django.views.decorators.debug import sensitive_variables

from nodes.models import ActionKind, Node, PanelKey
from nodes.probing import platforms
from nodes.remote import ssh

INSTALL_KEY = (
    'umask 077 && mkdir -p .ssh && touch .ssh/authorized_keys && '
    '(grep -qxF "$1" .ssh/authorized_keys || printf "%s\\n" "$1" >> .ssh/authorized_keys)'
)


class RegistrationError(Exception):
    pass


@sensitive_variables("password", "target")
def install_panel_key(host: str, port: int, username: str, host_key: str, password: str) -> None:
    """Log in once with a password and add the panel's public key, like ssh-copy-id. The password is not kept."""
    target = ssh.SSHTarget(host, username, host_key, port, password=password)
    try:
        result = ssh.sh(target, INSTALL_KEY, PanelKey.get().public_key)
    finally:
        ssh.forget(target)
    refuse_windows(host, result)
    if result.exit_status != 0:
        raise RegistrationError(f"Could not add the panel's key to ~/.ssh/authorized_keys: {result.stderr.strip()}")


def refuse_windows(host: str, result: ssh.Result) -> None:
    """A native Windows login (cmd.exe or PowerShell answering) is refused, pointing to WSL2."""
    if platforms.windows_login(result.stdout + result.stderr, result.exit_status):
        raise RegistrationError(platforms.windows_refusal(host))


class NotConfirmed(RegistrationError):
    pass


def confirmed_host_key(host: str, port: int, fingerprint: str) -> str:
    """The laptop's host key now, if it is the one whose fingerprint the admin confirmed (a script's second
    step, as the browser's confirmation page is). SSHError if the laptop does not answer."""
    key = ssh.host_key_of(host, port)
    presented = ssh.fingerprint(key)
    if presented != (fingerprint or "").strip():
        raise NotConfirmed(f"{host}:{port} presents the host key {presented}, not the one confirmed "
                           f"({fingerprint or 'none'}). Check that it is the laptop you mean, then confirm it.")
    return key


def check_login(node: Node) -> None:
    """Log in with the node's key and run one command; raises RegistrationError in plain words."""
    target = node.ssh_target()
    try:
        result = ssh.run(target, ["true"], timeout=ssh.CONNECT_TIMEOUT)
    except ssh.HostKeyMismatch as exc:
        raise RegistrationError(f"{exc} Check that {node.host} is the laptop you mean.") from None
    except ssh.SSHError as exc:
        raise RegistrationError(str(exc)) from None
    finally:
        ssh.forget(target)
    refuse_windows(node.host, result)
    if result.exit_status != 0:
        raise RegistrationError(f"Logged in to {node.host}, but `true` failed: {result.stderr.strip()}")


def check_fields(node: Node, exclude: tuple[str, ...] = ()) -> None:
    """The model's own checks (address, user name, folder, a name no page has), in words, before any connection."""
    try:
        node.full_clean(exclude=exclude)
    except ValidationError as exc:
        raise RegistrationError(" ".join(f"{field}: {' '.join(errors)}" for field, errors in
                                         exc.message_dict.items())) from None


@sensitive_variables("password")
def register(node: Node, password: str | None = None, probe: bool = True, user=None) -> Node:
    """Save `node` (host key already confirmed by an admin) once the panel can log in; nothing is saved otherwise."""
    check_fields(node)
    if password:
        try:
            install_panel_key(node.host, node.port, node.username, node.host_key, password)
        except ssh.SSHError as exc:
            raise RegistrationError(str(exc)) from None
    check_login(node)
    with transaction.atomic():
        node.save()
        if probe:
            from nodes.tasks import enqueue

            enqueue(node, ActionKind.PROBE, user)
    return node
