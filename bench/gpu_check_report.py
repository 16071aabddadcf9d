"""What bench/gpu_check.sh found, as a Markdown table on stdout and JSON in a file. Stdlib only.

    python bench/gpu_check_report.py WORK_DIR --json OUT.json

WORK_DIR holds facts.tsv (key<TAB>value lines), devices.tsv (the bundle's devices as `--list-devices` prints
them) and run-<label>.json (one bench/gpu_check_client.py answer per run). Each GPU run's tokens are compared
with the CPU run's: identical, or the index and text of the first that differs.
"""

import argparse
import json
from pathlib import Path

SINGLE = ("tokens", "host", "bundle", "bundle_bytes", "bundle_sha256", "manifest", "backends", "list_method",
          "driver_cuda", "nvidia_driver", "vulkan_loader", "vulkan_icds", "nvidia_icd",
          "nvidia_driver_capabilities", "head", "model", "nvcc", "cuda_build", "outcome")


def read_facts(work: Path) -> dict:
    facts: dict = {"nvidia_smi": [], "vulkan_says": [], "skipped": [], "runs": {}}
    for line in (work / "facts.tsv").read_text().splitlines():
        key, _, value = line.partition("\t")
        if key in ("nvidia_smi", "vulkan_says"):
            facts[key].append(value)
        elif key == "skip":
            facts["skipped"].append(value)
        elif key == "run":
            label, _, device = value.partition("\t")
            facts["runs"][label] = {"device": device, **json.loads((work / f"run-{label}.json").read_text())}
        elif key in SINGLE:
            facts[key] = value
    facts["devices"] = read_devices(work / "devices.tsv")
    manifest = Path(facts.get("manifest", "/nonexistent"))
    if manifest.is_file():
        data = json.loads(manifest.read_text())
        facts["bundle_manifest"] = {k: data.get(k) for k in ("llama_cpp_python", "llama_cpp_commit", "rpc_protocol",
                                                             "llama_cpp_patches", "min_glibc", "built_at")}
    return facts


def read_devices(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    devices = []
    for line in path.read_text().splitlines():
        _, name, kind, total, free, description = (line.split("\t", 5) + [""] * 6)[:6]
        devices.append({"name": name, "type": kind, "total": int(total), "free": int(free),
                        "description": description})
    return devices


def compare(run: dict, reference: dict) -> dict:
    """Equal to the reference token for token, or where they part."""
    ours, theirs = run["tokens"], reference["tokens"]
    for index, (a, b) in enumerate(zip(ours, theirs, strict=False)):  # lengths may differ
        if a != b:
            return {"identical": False, "first_difference": index,
                    "text": run["pieces"][index], "reference_text": reference["pieces"][index]}
    return {"identical": len(ours) == len(theirs), "first_difference": None}


def with_comparisons(facts: dict) -> dict:
    runs, reference = facts["runs"], facts["runs"].get("CPU")
    for label, run in runs.items():
        if reference and label != "CPU":
            run["vs_cpu"] = compare(run, reference)
            if reference.get("decode_tok_s") and run.get("decode_tok_s"):
                run["speed_vs_cpu"] = round(run["decode_tok_s"] / reference["decode_tok_s"], 2)
    return facts


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def machine_rows(facts: dict) -> list[tuple[str, str]]:
    manifest = facts.get("bundle_manifest") or {}
    patches = ", ".join(p.split("-")[0] for p in manifest.get("llama_cpp_patches") or []) or "none listed"
    devices = "; ".join(f"{d['name']} ({d['type']}, {d['description']}, {mib(d['total'])})"
                        for d in facts["devices"]) or "none"
    rows = [
        ("machine", facts.get("host", "?")),
        ("NVIDIA GPU (nvidia-smi)", " / ".join(facts["nvidia_smi"]) or "none"),
        ("driver's CUDA", facts.get("driver_cuda") or "-"),
        ("Vulkan loader (libvulkan.so.1)", facts.get("vulkan_loader") or "missing"),
        ("Vulkan ICDs", facts.get("vulkan_icds", "-")),
        ("NVIDIA Vulkan ICD", facts.get("nvidia_icd", "-")),
        ("bundle", f"{facts.get('bundle', 'none')} ({int(facts.get('bundle_bytes', 0)):,} bytes; "
                   f"{facts.get('bundle_sha256', 'no manifest beside it')})"),
        ("bundle's llama.cpp", f"llama-cpp-python {manifest.get('llama_cpp_python', '?')}, "
                               f"RPC {manifest.get('rpc_protocol', '?')}, patches {patches}"),
        ("bundle's backends", facts.get("backends", "-")),
        ("devices its rpc-server lists", f"{devices} (by {facts.get('list_method', '-')})"),
        ("ggml_vulkan says", " / ".join(facts["vulkan_says"]).replace(' | ', ', ') or "-"),
        ("head (client)", facts.get("head", "-")),
        ("model", facts.get("model", "-")),
    ]
    if "nvidia_driver_capabilities" in facts:
        rows.append(("NVIDIA_DRIVER_CAPABILITIES", facts["nvidia_driver_capabilities"]))
    if "nvcc" in facts:
        rows.append(("nvcc", facts["nvcc"]))
    if "cuda_build" in facts:
        rows.append(("ggml-cuda built here", facts["cuda_build"]))
    return rows


def run_rows(facts: dict) -> list[str]:
    lines = ["| run | device | layers offloaded | model buffers (MiB) | load s | first token s | tokens/s | "
             "vs CPU | tokens vs CPU |", "|---|---|---|---|---|---|---|---|---|"]
    for label, run in facts["runs"].items():
        buffers = ", ".join(f"{k} {v:g}" for k, v in run.get("model_buffers_mib", {}).items())
        same = run.get("vs_cpu")
        if same is None:
            same_text = "reference" if label == "CPU" else "-"
        elif same["identical"]:
            same_text = f"identical ({len(run['tokens'])}/{len(run['tokens'])})"
        else:
            same_text = (f"first differs at {same['first_difference']}: {same['text']!r} "
                         f"(CPU {same['reference_text']!r})")
        lines.append(f"| {label} | {run['device']} | {run.get('offloaded')} | {buffers} | {run['load_s']} | "
                     f"{run['first_token_s']} | {run.get('decode_tok_s')} | {run.get('speed_vs_cpu', '-')} | "
                     f"{same_text} |")
    return lines


def markdown(facts: dict) -> str:
    lines = ["| what | found |", "|---|---|"]
    lines += [f"| {k} | {v.replace('|', '/')} |" for k, v in machine_rows(facts)]
    if facts["runs"]:
        lines += ["", f"{facts.get('tokens', '?')} greedy tokens, every layer on the rpc-server's device:", ""]
        lines += run_rows(facts)
    lines += [""] + [f"- {why}" for why in facts["skipped"]]
    lines += ["", facts.get("outcome", "outcome unknown")]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("work", type=Path)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    facts = with_comparisons(read_facts(args.work))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(facts, indent=1))
    print(markdown(facts))
    print(f"\n(figures as JSON: {args.json})")


if __name__ == "__main__":
    main()
