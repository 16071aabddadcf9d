"""What a laptop's login name and address may look like: one rule for every door (forms, API, addnode) and for
nodes/remote/ssh.py, which refuses anything else before it reaches a command line."""

import ipaddress
import re

# Stricter than OpenSSH's own checks (ssh.c valid_ruser, valid_hostname: no leading '-', no shell
# metacharacters, no spaces or control characters): what a laptop's login and address really look like.
USER_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.@-]{0,63}")
HOST_LABEL = re.compile(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
SCOPE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,14}")  # an IPv6 zone: an interface (fe80::1%eth0) or its index
USER_RULE = "A user name holds only letters, digits, '.', '_', '-' and '@', and starts with a letter, digit or '_'."
# A domain login (alice@corp) is a user name; the laptop's own address after '@' is a mistake: it goes in its field.
USER_AT_ADDRESS = ("The user name ends in an address (user@10.0.0.5); the laptop's address goes in its own field, "
                   "not user@host.")
AROUND = "starts or ends with a space or a line break; remove it."
HOST_RULE = ("Enter an IP address or a host name: letters, digits, '-' and '.', "
             "with no part starting or ending with '-'.")


def user_problem(username: str) -> str | None:
    """Why `username` is no login name for a laptop (it could be read as an option or a command); None if fine."""
    if username != username.strip():
        return f"The user name {AROUND}"
    if not USER_NAME.fullmatch(username):
        return USER_RULE
    _, at, after = username.rpartition("@")
    if at and _is_address(after):
        return USER_AT_ADDRESS
    return None


def _is_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def host_problem(host: str) -> str | None:
    """Why `host` is no address of a laptop; None if fine."""
    if host != host.strip():
        return f"The address {AROUND}"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        pass
    else:  # Python takes any zone after "%": "fe80::1%$(id)" and a newline too
        zone = getattr(address, "scope_id", None)
        return HOST_RULE if zone is not None and not SCOPE.fullmatch(zone) else None
    labels = host.removesuffix(".").split(".")
    if len(host) > 253 or not all(HOST_LABEL.fullmatch(label) for label in labels):
        return HOST_RULE
    return None
