"""The learner's DeepSpeed config: bf16 weights accumulate their micro-batches' gradients in fp32."""
import os
import subprocess
import sys

from jury.learner.learner import deepspeed_config
from jury.protocol.config import LearnerConfig


def test_bf16_accumulates_gradients_in_fp32():
    bf16 = deepspeed_config(LearnerConfig(dtype="bfloat16", zero_stage=1))
    assert bf16["bf16"] == {"enabled": True} and bf16["data_types"] == {"grad_accum_dtype": "fp32"}
    assert "data_types" not in deepspeed_config(LearnerConfig())  # fp32: nothing to widen


# One bf16 weight, 32 micro-batches: the first has gradient 1, each other 2**-9. Summed in fp32 the
# step's gradient is 1 + 31/512 = 1.0605 (1.0625 once rounded to bf16); summed in bf16, each 2**-9
# is below half the bf16 spacing at 1 (2**-8) and is lost: 1.0. Summed again with every micro-batch
# (DeepSpeed's bf16 optimizer without engine.forward's hook, see update._before_forward): about 32.
CODE = """
import torch
from jury.learner.learner import _init_distributed, deepspeed_config
from jury.protocol.config import LearnerConfig
from jury.learner.update import _before_forward
import deepspeed
_init_distributed("gloo", 0, 1, None)
model = torch.nn.Linear(1, 1, bias=False).to(torch.bfloat16)
torch.nn.init.ones_(model.weight)
cfg = LearnerConfig(dtype="bfloat16", zero_stage={stage}, grad_clip=0.0)
engine, *_ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=deepspeed_config(cfg))
for i in range(32):  # as learner/update.py does: the boundary by hand, the module called directly
    engine.set_gradient_accumulation_boundary(i == 31)
    _before_forward(engine)
    x = torch.tensor([[1.0 if i == 0 else 2.0 ** -9]], dtype=torch.bfloat16)
    engine.backward(engine.module(x).sum(), scale_wrt_gas=False)
engine.step()
print("grad_norm", float(engine.get_global_grad_norm()))
"""


def test_deepspeed_on_the_cpu_sums_bf16_micro_batches_in_fp32(tmp_path):
    """Real DeepSpeed (CPU accelerator, one rank, ZeRO-1: the learner's bf16 path)."""
    env = {**os.environ, "DS_ACCELERATOR": "cpu"}
    out = subprocess.run([sys.executable, "-c", CODE.replace("{stage}", "1")], env=env, capture_output=True,
                         text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-3000:]
    norm = float(out.stdout.split("grad_norm")[-1])
    assert abs(norm - (1 + 31 / 512)) < 4e-3, f"the step's gradient is {norm}: 1.0 if summed in bf16"
