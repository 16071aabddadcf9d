"""/api/nodes/: laptops, their actions, selections of many, LAN scans; one router (router.py) the shell mounts."""
