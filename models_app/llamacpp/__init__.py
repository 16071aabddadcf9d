"""The one door to llama.cpp in this process and its children: the library (libllama), one-shot generations in
a child process (oneshot), and the check that this CPU runs the build (cpucheck). Imports nothing of the apps:
models_app and jobs both sit on it."""
