"""HiCache and prefill/decode on CPU: what the real server needs without CUDA.

`kit serve` puts this directory on PYTHONPATH (with
--enable-hierarchical-cache or --disaggregation-mode), so every SGLang process,
the scheduler spawned by multiprocessing included, imports it at startup.
Four things stand in the way on a machine without an NVIDIA driver (see
hack/sglang/README.md):

1. The host pool registers its memory with cudaHostRegister ("pinning") so
   GPU copies can use DMA. There is no GPU; the pool is ordinary memory.
2. The device<->host KV copy functions come from sgl_kernel.kvcacheio and are
   imported only on CUDA/ROCm/XPU: on CPU, `transfer_kv_direct` is an unbound
   name. With --hicache-io-backend direct --hicache-mem-layout layer_first
   it is the only one the MHA host pool calls; it is written here in torch.
   A PD decode server keeps such a host pool too (its retraction backup).
   The mooncake storage backend makes SGLang switch the host pool to
   page_first_direct: its two copies (`transfer_kv_all_layer_direct_lf_pf`,
   `transfer_kv_per_layer_direct_pf_lf`) are written here too.
3. The host pool remembers `pin_memory=True` and asks torch for pinned
   staging pages with it when HiCache's L3 storage tier loads a page
   (`get_dummy_flat_data_page`): torch pins through CUDA. On CPU the pool is
   created with `pin_memory=False`.
4. The prefill's Mooncake KV sender stages the page indices in pinned memory
   behind a CUDA event; on CPU it takes SGLang's plain host-array path.

Nothing else is changed: the radix tree, the eviction to host, the load back,
the KV transfer (Mooncake's TCP transport), the metrics and the cache report
are SGLang's own.
"""

import importlib.abc
import importlib.util
import sys

_TARGETS = {
    "sglang.srt.mem_cache.pool_host.base": "_patch_base",
    "sglang.srt.mem_cache.pool_host.common": "_patch_common",
    "sglang.srt.mem_cache.pool_host.mha": "_patch_mha",
    "sglang.srt.disaggregation.mooncake.conn": "_patch_mooncake_conn",
}


def transfer_kv_direct(src_layers, dst_layers, src_indices, dst_indices, page_size):
    """Copy the tokens at src_indices of each source layer to dst_indices of its
    destination (K layers then V layers, paired in order). Indices are token
    slots, page-aligned runs of page_size; a row copy needs no page grouping."""
    for src, dst in zip(src_layers, dst_layers, strict=True):
        dst[dst_indices.to(dst.device)] = src[src_indices.to(src.device)].to(dst.dtype)


def transfer_kv_all_layer_direct_lf_pf(src_ptrs, dst_ptrs, src_indices, dst_indices, page_size):
    """Device (layer first: K layers then V layers, rows of token slots) to a host pool in
    page_first_direct layout ([page, layer, slot in page, head, dim] for K and for V), which
    SGLang switches to for the mooncake storage backend. Host token h is page h // page_size,
    slot h % page_size."""
    layers = len(src_ptrs) // 2
    for kv, dst in enumerate(dst_ptrs):
        pages = (dst_indices // page_size).to(dst.device)
        slots = (dst_indices % page_size).to(dst.device)
        for layer in range(layers):
            src = src_ptrs[kv * layers + layer]
            dst[pages, layer, slots] = src[src_indices.to(src.device)].to(dst.dtype)


def transfer_kv_per_layer_direct_pf_lf(src_ptrs, dst_ptrs, src_indices, dst_indices, layer_id, page_size):
    """One layer back from a page_first_direct host pool ([K, V]) to the device's K and V rows."""
    for src, dst in zip(src_ptrs, dst_ptrs, strict=True):
        pages = (src_indices // page_size).to(src.device)
        slots = (src_indices % page_size).to(src.device)
        dst[dst_indices.to(dst.device)] = src[pages, layer_id, slots].to(dst.dtype)


def _alloc_unpinned(dims, dtype, device, pin_memory, allocator, registration_granularity_bytes=None):
    # SGLang's allocator, without the cudaHostRegister call that follows it on CUDA.
    return allocator.allocate(dims, dtype=dtype, device=device)


def _patch_base(module):
    cls = module.HostKVCache
    original_init = cls.__init__

    def __init__(self, *args, **kwargs):
        # Nothing to pin on a machine without a GPU; every later torch call sees False.
        kwargs["pin_memory"] = False
        original_init(self, *args, **kwargs)

    cls.__init__ = __init__


def _patch_common(module):
    module.ALLOC_MEMORY_FUNCS["cpu"] = _alloc_unpinned


def _patch_mha(module):
    for fn in (transfer_kv_direct, transfer_kv_all_layer_direct_lf_pf, transfer_kv_per_layer_direct_pf_lf):
        if not hasattr(module, fn.__name__):
            setattr(module, fn.__name__, fn)


def _patch_mooncake_conn(module):
    # The prefill's Mooncake sender copies the page indices to pinned host memory
    # behind a torch.cuda.Event; on CPU they are host memory already, and SGLang's
    # other path (kv_to_page_indices: the same indices as a numpy array) is taken.
    module.MooncakeKVSender.supports_host_tensor_indices = False


class _PatchAfterImport(importlib.abc.MetaPathFinder):
    """Patches those modules right after SGLang imports them."""

    def find_spec(self, fullname, path, target=None):
        patch = _TARGETS.get(fullname)
        if patch is None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original_exec = loader.exec_module

        def exec_module(module):
            original_exec(module)
            globals()[patch](module)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PatchAfterImport())
