"""The llama.cpp RPC runtime a laptop runs: the bundle built here (bundle), pushing and checking it (install),
building it on the laptop itself when no bundle fits (build_here, buildplan, toolchain, rpcsource). Uses remote/."""
