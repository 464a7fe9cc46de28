"""Stand-in for the `sgl_kernel` package (PyPI `sglang-kernel`).

The published package is a CUDA build: importing it needs libcuda.so.1, which a
machine without an NVIDIA driver does not have, and SGLang imports it at module
level from many places (quantization, attention, the CPU memory allocator).
This stand-in makes every name and submodule importable; calling one raises
NotImplementedError naming it, so a code path that really needs a kernel fails
loudly instead of computing nonsense. The one CPU op a Llama model on the CPU
engine calls, `assign_req_to_token_pool_cpu`, is written out in plain torch.
"""

import importlib.abc
import importlib.machinery
import sys
import types

__version__ = "0.0.0+cacheroute-stand-in"


class _Missing:
    def __init__(self, name):
        self._name = name

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{self._name} is a CUDA kernel the cacheroute kit does not have")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self._name}.{name}")

    def __repr__(self):
        return f"<missing {self._name}>"


class _Module(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _Missing(f"{self.__name__}.{name}")


class _SubmoduleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _Module(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _SubmoduleFinder())
sys.modules[__name__].__class__ = _Module


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset, out_cache_loc, pool_len):
    """Row i of the batch takes the next end[i]-start[i] slots of out_cache_loc (mem_cache/allocation.py)."""
    offset = 0
    for i in range(req_pool_indices.shape[0]):
        start, end = int(start_offset[i]), int(end_offset[i])
        n = end - start
        req_to_token[int(req_pool_indices[i]), start:end] = out_cache_loc[offset : offset + n].to(req_to_token.dtype)
        offset += n
