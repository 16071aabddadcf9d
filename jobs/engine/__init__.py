"""The engine: what runs in a deployment's engine worker. `workers` starts and watches those workers; in
each, `child` settles what the last one left, `serve` is the loop that claims jobs and steps them together
through `sequences` (llama.cpp's batch and samplers) on the model `model` loads, and `runner` turns a job
into work and its outcome back into a job. `llamacpp` and `oneshot` are the door to llama.cpp outside the
engine; `recovery` replaces a deployment whose laptop died (or moved: `moves`); `verify` compares a run with the
head alone; `speedtest` is Measure speed's model half."""
