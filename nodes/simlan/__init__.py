"""The test bed, not the product: simulated laptops in network namespaces, each a real sshd with its own
CPU quota, memory, power and system (lan, arm, cpu, dhcp, systems, power, processes). `manage.py simlan`, the
demo and the tests share it; nothing of the product imports it but the demo."""
