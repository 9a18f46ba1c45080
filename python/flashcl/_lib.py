"""The C library through ctypes: finding libflashcl.so, the structures of
include/flashcl.h mirrored field for field, and the prototypes.

ctypes.CDLL releases the GIL around every foreign call, so a long attention
call does not stop other Python threads.  tests/test_struct_layout.py checks
these Structures against the header's field lists and against sizeof /
offsetof as the C compiler computes them.
"""
import ctypes
import os

# ---- finding the library ---------------------------------------------------

_HERE = os.path.dirname(os.path.abspath(__file__))
_SONAMES = ("libflashcl.so", "libflashcl.so.0")


def _candidates():
    """Where libflashcl is looked for, in order (README "Python"):
    1. $FLASHCL_LIBRARY, a path to the shared library;
    2. beside this package (pip install ./python after the CMake build puts
       a copy there);
    3. the source tree's build/ folder, when the package is imported from
       python/ in a checkout (PYTHONPATH=python);
    4. the system's loader (an installed library, LD_LIBRARY_PATH)."""
    env = os.environ.get("FLASHCL_LIBRARY")
    if env:
        return [("FLASHCL_LIBRARY", env)]
    found = []
    for name in _SONAMES:
        found.append(("package", os.path.join(_HERE, name)))
    build = os.path.join(os.path.dirname(os.path.dirname(_HERE)), "build")
    for name in _SONAMES:
        found.append(("build tree", os.path.join(build, name)))
    for name in _SONAMES:
        found.append(("system", name))
    return found


def _load():
    tried = []
    for origin, path in _candidates():
        if origin != "system" and not os.path.exists(path):
            tried.append(path + " (absent)")
            continue
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append("%s (%s)" % (path, e))
    raise ImportError("flashcl: libflashcl.so not found; tried: " + "; ".join(tried) +
                      ". Set FLASHCL_LIBRARY to the library built by CMake.")


lib, library_path = _load()

# ---- the structures (include/flashcl.h, in declaration order) -------------

c_size = ctypes.c_size_t
c_status = ctypes.c_int
c_enum = ctypes.c_int          # fcl_dtype, fcl_alibi_mode, fcl_kernel_kind
cl_ulong = ctypes.c_uint64     # cl_device_type
cl_handle = ctypes.c_void_p    # cl_mem, cl_context, cl_event, ...


class Layout(ctypes.Structure):
    _fields_ = [("offset", c_size), ("stride_batch", c_size), ("stride_head", c_size),
                ("stride_seq", c_size)]


class AttentionDesc(ctypes.Structure):
    _fields_ = [
        ("batch", c_size), ("heads_q", c_size), ("heads_kv", c_size),
        ("seqlen_q", c_size), ("seqlen_k", c_size), ("head_dim", c_size),
        ("dtype", c_enum), ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int),
        ("q", Layout), ("k", Layout), ("v", Layout), ("o", Layout),
        ("dout", Layout), ("dq", Layout), ("dk", Layout), ("dv", Layout),
        ("lse_offset", c_size),
        ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float), ("alibi", c_enum),
        ("dropout_p", ctypes.c_float), ("dropout_seed", ctypes.c_uint64),
        ("dropout_offset", ctypes.c_uint32),
        ("varlen", ctypes.c_int), ("total_q", c_size), ("total_k", c_size),
        ("block_m", c_size), ("block_n", c_size),
        ("block_mask_stride_batch", c_size), ("block_mask_stride_head", c_size),
        ("num_splits", ctypes.c_int),
        ("out_dtype", c_enum),
        ("head_dim_v", c_size),
        ("sinks", ctypes.c_int),
    ]


class AttentionAux(ctypes.Structure):
    _fields_ = [("alibi_slopes", cl_handle), ("cu_seqlens_q", cl_handle),
                ("cu_seqlens_k", cl_handle), ("block_mask", cl_handle),
                ("descale_q", cl_handle), ("descale_k", cl_handle), ("descale_v", cl_handle),
                ("sinks", cl_handle), ("dsinks", cl_handle)]


class AttentionAuxHost(ctypes.Structure):
    _fields_ = [("alibi_slopes", ctypes.c_void_p), ("cu_seqlens_q", ctypes.c_void_p),
                ("cu_seqlens_k", ctypes.c_void_p), ("block_mask", ctypes.c_void_p),
                ("descale_q", ctypes.c_void_p), ("descale_k", ctypes.c_void_p),
                ("descale_v", ctypes.c_void_p), ("sinks", ctypes.c_void_p),
                ("dsinks", ctypes.c_void_p)]


class DeviceRef(ctypes.Structure):
    _fields_ = [("platform_index", ctypes.c_int), ("device_index", ctypes.c_int),
                ("type", cl_ulong), ("platform_name", ctypes.c_char * 128),
                ("device_name", ctypes.c_char * 128)]


class DeviceInfo(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 256), ("vendor", ctypes.c_char * 128),
        ("driver_version", ctypes.c_char * 128), ("device_version", ctypes.c_char * 128),
        ("platform_name", ctypes.c_char * 128), ("type", cl_ulong),
        ("vendor_id", ctypes.c_uint32), ("compute_units", ctypes.c_uint32),
        ("max_work_group_size", c_size), ("max_work_item_sizes", c_size * 3),
        ("global_mem_bytes", ctypes.c_uint64), ("max_alloc_bytes", ctypes.c_uint64),
        ("local_mem_reported", ctypes.c_uint64), ("local_mem_usable", ctypes.c_uint64),
        ("local_mem_probed", ctypes.c_int), ("local_mem_is_dedicated", ctypes.c_int),
        ("simd_width", ctypes.c_uint32), ("native_float_width", ctypes.c_uint32),
        ("cache_bytes", ctypes.c_uint64), ("nv_compute_capability", ctypes.c_int),
        ("has_fp64", ctypes.c_int), ("has_fp16_arith", ctypes.c_int),
        ("has_subgroups", ctypes.c_int),
        ("extensions", ctypes.c_char_p), ("profile_name", ctypes.c_char_p),
    ]


class ContextOptions(ctypes.Structure):
    _fields_ = [("platform_index", ctypes.c_int), ("device_index", ctypes.c_int),
                ("profile", ctypes.c_char_p), ("disk_cache", ctypes.c_int),
                ("cache_dir", ctypes.c_char_p), ("cache_max_bytes", ctypes.c_uint64),
                ("enable_profiling", ctypes.c_int), ("skip_local_mem_probe", ctypes.c_int),
                ("portable_only", ctypes.c_int)]


class Plan(ctypes.Structure):
    _fields_ = [
        ("kernel", c_enum), ("dtype", c_enum), ("head_dim", c_size),
        ("head_dim_padded", c_size), ("local_mem_reported", ctypes.c_uint64),
        ("local_mem_usable", ctypes.c_uint64), ("paper_m_elements", ctypes.c_uint64),
        ("paper_bc", c_size), ("paper_br", c_size), ("br", c_size), ("bc", c_size),
        ("work_group_size", c_size), ("threads_row", c_size), ("threads_col", c_size),
        ("local_bytes", ctypes.c_uint64), ("variant", ctypes.c_char * 32),
        ("source", ctypes.c_char * 64), ("reason", ctypes.c_char * 384),
        ("pack", c_size), ("num_splits", c_size), ("split_keys", c_size),
    ]


class KvcacheDesc(ctypes.Structure):
    _fields_ = [
        ("batch", c_size), ("heads_q", c_size), ("heads_kv", c_size), ("head_dim", c_size),
        ("seqlen_q", c_size), ("seqlen_new", c_size), ("dtype", c_enum),
        ("softmax_scale", ctypes.c_float), ("causal", ctypes.c_int),
        ("window_left", ctypes.c_int64), ("window_right", ctypes.c_int64),
        ("softcap", ctypes.c_float), ("alibi", c_enum),
        ("page_size", c_size), ("cache_seqlen", c_size), ("num_pages", c_size),
        ("max_pages_per_seq", c_size), ("page_table_stride", c_size),
        ("q", Layout), ("o", Layout), ("k_cache", Layout), ("v_cache", Layout),
        ("k_new", Layout), ("v_new", Layout),
        ("lse_offset", c_size), ("num_splits", ctypes.c_int), ("out_dtype", c_enum),
        ("head_dim_v", c_size),
        ("sinks", ctypes.c_int),
        ("rotary_dim", c_size), ("rotary_interleaved", ctypes.c_int), ("rotary_rows", c_size),
        ("shared_kv", ctypes.c_int),
    ]


_KV_ARRAYS = [("q", None), ("k_cache", None), ("v_cache", None), ("cache_seqlens", None),
              ("page_table", None), ("k_new", None), ("v_new", None), ("alibi_slopes", None),
              ("o", None), ("lse", None),
              ("descale_q", None), ("descale_k", None), ("descale_v", None), ("sinks", None),
              ("rotary_cos", None), ("rotary_sin", None)]


class KvcacheBuffers(ctypes.Structure):
    _fields_ = [(name, cl_handle) for name, _ in _KV_ARRAYS]


class KvcacheHost(ctypes.Structure):
    _fields_ = [(name, ctypes.c_void_p) for name, _ in _KV_ARRAYS]


class MemoryStats(ctypes.Structure):
    _fields_ = [("allocations", ctypes.c_uint64), ("current_bytes", ctypes.c_uint64),
                ("peak_bytes", ctypes.c_uint64), ("largest_bytes", ctypes.c_uint64)]


# Every structure mirrored here, by its C name (for the layout test).
STRUCTS = {
    "fcl_layout": Layout, "fcl_attention_desc": AttentionDesc,
    "fcl_attention_aux": AttentionAux, "fcl_attention_aux_host": AttentionAuxHost,
    "fcl_device_ref": DeviceRef, "fcl_device_info": DeviceInfo,
    "fcl_context_options": ContextOptions, "fcl_plan": Plan,
    "fcl_kvcache_desc": KvcacheDesc, "fcl_kvcache_buffers": KvcacheBuffers,
    "fcl_kvcache_host": KvcacheHost, "fcl_memory_stats": MemoryStats,
}

# ---- enums and status names (the header's values) -------------------------

DTYPE_FP32, DTYPE_FP16, DTYPE_BF16 = 0, 1, 2
LAYOUT_BSHD = 0
ALIBI_NONE, ALIBI_PER_HEAD, ALIBI_PER_BATCH_HEAD = 0, 1, 2
KERNELS = {"forward": 0, "backward_dkdv": 1, "backward_dq": 2, "decode": 3}

# FCL_STATUS_MAP's names by value (the text comes from fcl_status_string).
STATUS_NAMES = {
    0: "FCL_OK", 1: "FCL_ERROR_NULL_ARGUMENT", 2: "FCL_ERROR_INVALID_SHAPE",
    3: "FCL_ERROR_HEAD_DIM_UNSUPPORTED", 4: "FCL_ERROR_HEADS_NOT_DIVISIBLE",
    5: "FCL_ERROR_OVERLAPPING_STRIDES", 6: "FCL_ERROR_BUFFER_TOO_SMALL",
    7: "FCL_ERROR_BUFFER_ALIASING", 8: "FCL_ERROR_DTYPE_UNSUPPORTED",
    9: "FCL_ERROR_INVALID_VALUE", 10: "FCL_ERROR_BUILD_FAILED", 11: "FCL_ERROR_NO_DEVICE",
    12: "FCL_ERROR_DEVICE_NOT_FOUND", 13: "FCL_ERROR_BAD_DEVICE_SPEC",
    14: "FCL_ERROR_OUT_OF_HOST_MEMORY", 15: "FCL_ERROR_NO_PLAN",
    16: "FCL_ERROR_UNKNOWN_PROFILE", 17: "FCL_ERROR_PROFILE_NOT_RUNNABLE",
    18: "FCL_ERROR_MISSING_LSE", 19: "FCL_ERROR_WRONG_CONTEXT",
    20: "FCL_ERROR_INVALID_CU_SEQLENS", 21: "FCL_ERROR_INVALID_CACHE_SEQLENS",
    22: "FCL_ERROR_INVALID_PAGE_TABLE",
    23: "FCL_ERROR_RANKS_DISAGREE", 24: "FCL_ERROR_MPI",
    25: "FCL_ERROR_DEVICE_LOOP_LIMIT",
}

# ---- prototypes -------------------------------------------------------------

P = ctypes.POINTER
vp = ctypes.c_void_p


def _proto(name, restype, *argtypes):
    fn = getattr(lib, name)
    fn.restype = restype
    fn.argtypes = list(argtypes)
    return fn


fcl_version_string = _proto("fcl_version_string", ctypes.c_char_p)
fcl_status_string = _proto("fcl_status_string", ctypes.c_char_p, c_status)
fcl_list_devices = _proto("fcl_list_devices", c_status, P(DeviceRef), c_size, P(c_size))
fcl_context_options_init = _proto("fcl_context_options_init", None, P(ContextOptions))
fcl_context_create = _proto("fcl_context_create", c_status, P(ContextOptions), P(vp))
fcl_context_create_from_cl = _proto("fcl_context_create_from_cl", c_status, cl_handle,
                                    cl_handle, cl_handle, P(ContextOptions), P(vp))
fcl_context_destroy = _proto("fcl_context_destroy", None, vp)
fcl_context_device_info = _proto("fcl_context_device_info", c_status, vp, P(DeviceInfo))
fcl_context_cl_context = _proto("fcl_context_cl_context", cl_handle, vp)
fcl_context_build_log = _proto("fcl_context_build_log", ctypes.c_char_p, vp)
fcl_context_memory_stats = _proto("fcl_context_memory_stats", c_status, vp, P(MemoryStats))
fcl_attention_desc_init = _proto("fcl_attention_desc_init", None, P(AttentionDesc), c_size,
                                 c_size, c_size, c_size, c_size, c_size, c_enum, c_enum)
fcl_plan_query = _proto("fcl_plan_query", c_status, vp, P(AttentionDesc), c_enum, P(Plan))
fcl_attention_forward_ex = _proto(
    "fcl_attention_forward_ex", c_status, vp, P(AttentionDesc), P(AttentionAux),
    cl_handle, cl_handle, cl_handle, cl_handle, cl_handle, ctypes.c_uint32, P(cl_handle),
    P(cl_handle))
fcl_attention_backward_ex = _proto(
    "fcl_attention_backward_ex", c_status, vp, P(AttentionDesc), P(AttentionAux),
    cl_handle, cl_handle, cl_handle, cl_handle, cl_handle, cl_handle, cl_handle, cl_handle,
    cl_handle, ctypes.c_uint32, P(cl_handle), P(cl_handle))
fcl_attention_forward_host_ex = _proto(
    "fcl_attention_forward_host_ex", c_status, vp, P(AttentionDesc), P(AttentionAuxHost),
    vp, vp, vp, vp, vp)
fcl_attention_backward_host_ex = _proto(
    "fcl_attention_backward_host_ex", c_status, vp, P(AttentionDesc), P(AttentionAuxHost),
    vp, vp, vp, vp, vp, vp, vp, vp, vp)
fcl_dropout_mask_host = _proto("fcl_dropout_mask_host", c_status, vp, P(AttentionDesc), vp)
fcl_kvcache_desc_init = _proto("fcl_kvcache_desc_init", None, P(KvcacheDesc), c_size, c_size,
                               c_size, c_size, c_size, c_size, c_enum)
fcl_kvcache_desc_set_contiguous = _proto("fcl_kvcache_desc_set_contiguous", None,
                                         P(KvcacheDesc), c_size)
fcl_kvcache_desc_set_paged = _proto("fcl_kvcache_desc_set_paged", None, P(KvcacheDesc),
                                    c_size, c_size, c_size)
fcl_attention_kvcache = _proto("fcl_attention_kvcache", c_status, vp, P(KvcacheDesc),
                               P(KvcacheBuffers), ctypes.c_uint32, P(cl_handle), P(cl_handle))
fcl_attention_kvcache_host = _proto("fcl_attention_kvcache_host", c_status, vp,
                                    P(KvcacheDesc), P(KvcacheHost))
fcl_kvcache_plan_query = _proto("fcl_kvcache_plan_query", c_status, vp, P(KvcacheDesc),
                                P(Plan))
