"""Running the panel itself: `make run`'s keeper that restarts a stopped process, the panel's own Redis, and
the processes it starts. Part of the shell: it may import anything."""
