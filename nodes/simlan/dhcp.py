"""A simulated laptop that comes back at another address, as DHCP gives a laptop after sleep or a new lease:
its namespace's address changes and its sshd listens there, with the same host key. Processes it started (its
rpc-servers) go on; connections to the old address go nowhere. The LAN's state file and known_hosts follow."""

import ipaddress

from nodes.simlan.lan import SimLan, SimLanError, run


def move(lan: SimLan, i: int, address: str) -> str:
    """Laptop `i` moves to `address` (in the LAN's subnet, unused); its old address, which is given back."""
    state, laptop, laptop_dir = lan.laptop(i)
    taken = {each.address for each in state.laptops} | {state.gateway}
    if ipaddress.ip_address(address) not in lan.network or address in taken:
        raise SimLanError(f"{address} is not a free address of {lan.network}.")
    was, prefix = laptop.address, lan.network.prefixlen
    run("ip", "-n", laptop.netns, "addr", "del", f"{was}/{prefix}", "dev", "eth0")
    run("ip", "-n", laptop.netns, "addr", "add", f"{address}/{prefix}", "dev", "eth0")
    run("ip", "-n", laptop.netns, "route", "replace", "default", "via", state.gateway)
    # A real DHCP client announces its new address (gratuitous ARP). Without it, a scan that found nobody there
    # minutes ago leaves the head's neighbour entry failed, and connecting answers "no route" for a while.
    run("ip", "neigh", "flush", "to", address, check=False)
    config = laptop_dir / "sshd_config"
    config.write_text(config.read_text().replace(f"ListenAddress {was}\n", f"ListenAddress {address}\n"))
    laptop.address = address
    lan.restart_sshd(state, laptop, laptop_dir)
    lan.write_known_hosts(state)
    lan.save(state)
    return was
