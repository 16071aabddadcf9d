"""What a laptop is and how it does: the probe (probe, probe.sh), its system (platforms), devices, power,
network (netcheck), measured speed (speed) and the doctor's checks. Uses remote/, runtime/ and servers/."""
