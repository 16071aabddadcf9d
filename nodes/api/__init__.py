"""/api/nodes/: laptops, their actions, selections of many, LAN scans; one router (nodes.api.router)."""
