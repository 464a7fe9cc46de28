"""Makes torch report one node of 8 NVIDIA H100 80GB GPUs, for argument checks only.

SGLang's argument resolution asks the platform what it runs on (device count,
compute capability, free memory) to pick defaults such as the attention
backend and the memory fraction, and some startup checks depend on those
answers. The operator renders arguments for GPU nodes, so they are checked as
SGLang would check them there: torch.cuda's query functions answer as an
8xH100 node does (the fake nodes the tests run carry the same H100 label).
Nothing here can run a kernel; it is imported before SGLang, by check-args
only, never by the real CPU server.
"""

import types

import torch

GPU_COUNT = 8
H100 = types.SimpleNamespace(
    name="NVIDIA H100 80GB HBM3",
    major=9,
    minor=0,
    total_memory=80 * 1024**3,
    multi_processor_count=132,
    L2_cache_size=50 * 1024**2,
    gcnArchName="",
    uuid="GPU-00000000-0000-0000-0000-000000000000",
    warp_size=32,
    is_integrated=False,
    max_threads_per_multi_processor=2048,
    regs_per_multiprocessor=65536,
    shared_memory_per_block_optin=232448,
)
FREE_BYTES = 78 * 1024**3


def install():
    cuda = torch.cuda
    cuda.is_available = lambda: True
    cuda.is_initialized = lambda: True
    cuda.device_count = lambda: GPU_COUNT
    cuda.current_device = lambda: 0
    cuda.set_device = lambda device: None
    cuda.get_device_capability = lambda device=None: (H100.major, H100.minor)
    cuda.get_device_name = lambda device=None: H100.name
    cuda.get_device_properties = lambda device=None: H100
    cuda.mem_get_info = lambda device=None: (FREE_BYTES, H100.total_memory)
    cuda.is_bf16_supported = lambda *args, **kwargs: True
    cuda.synchronize = lambda device=None: None
    cuda.empty_cache = lambda: None
    if torch.version.cuda is None:
        torch.version.cuda = "13.0"
