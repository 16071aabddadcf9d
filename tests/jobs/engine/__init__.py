"""The engine: its loop batching jobs on llama.cpp, its sequences and text, the head's CPU, and its counters."""
