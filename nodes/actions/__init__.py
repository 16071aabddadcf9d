"""What an admin sets going on laptops, one (steps: probe, install, measure, restart ...) or many at once
(bulk), each an action record with progress. Uses every room of nodes/ below pages/ and api/."""
