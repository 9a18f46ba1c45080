/* flashcl-info - lists OpenCL devices with their on-chip memory ("SRAM"),
 * reported and usable, and the tile plans flashcl chooses for a problem shape,
 * next to the FlashAttention paper's rule.  --profile shows the plan for an
 * emulated device.  --json for scripts. */
#include "flashcl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
    size_t head_dim, seqlen_q, seqlen_k;
    size_t batch, heads_q, heads_kv, decode_rows; /* the decode plan's KV-cache shape */
    size_t rotary_dim;         /* the decode plan's KV-cache call with rotary, 0: without */
    int rotary_interleaved;
    fcl_dtype dtype;
    int causal;
    int sinks;
    int json;
    int no_probe;
    const char *device;        /* "P:D" or NULL for all devices */
    const char *profile;       /* a name, "all", or NULL */
    size_t head_dim_v;         /* V's and O's columns; 0: head_dim */
    int shared_kv;             /* the decode plan's KV-cache call on one shared cache (MLA) */
} options;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: flashcl-info [--head-dim D] [--dtype fp32|fp16|bf16|e4m3|e5m2] [--seqlen N]\n"
            "                    [--seqlen-k N] [--causal] [--sinks] [--device P:D]\n"
            "                    [--profile NAME|all] [--list-profiles] [--no-probe] [--json]\n"
            "                    [--batch B] [--heads-q H] [--heads-kv H] [--decode-rows R]\n"
            "                    [--head-dim-v DV] [--rotary-dim R [--rotary-interleaved]]\n"
            "                    [--shared-kv]\n"
            "Lists every OpenCL device (or the one given) with its local memory and the\n"
            "tile plans for a head_dim x dtype x seqlen problem (default 64, fp32, 4096),\n"
            "and the decode plan of a KV-cache call: B sequences of seqlen-k cached keys,\n"
            "R query rows, H query heads on H K/V heads (default 1, 32, 8, 1), with its\n"
            "GQA packing and split-KV chunks; with --rotary-dim, the call also rotates Q and\n"
            "the appended K rows (its plan is the same; the line says what rotary adds).\n"
            "--head-dim-v: V and O narrower than Q and K (fcl_attention_desc.head_dim_v,\n"
            "default head_dim), in every plan.\n"
            "--profile plans for an emulated device, running on the chosen (or default) one.\n"
            "FP8 (e4m3, e5m2) has the forward only: its other plans are not listed.\n"
            "--sinks plans calls with attention sinks (one logit per query head, every\n"
            "piece): the same plans, the sink joining each row's sum where it is final.\n"
            "--shared-kv: the KV-cache call on one cache whose rows' first head_dim_v\n"
            "columns are V (multi-head latent attention, e.g. --head-dim 576 --head-dim-v\n"
            "512 --heads-q 128 --heads-kv 1 --dtype fp16).  Above head_dim 256 only the\n"
            "KV-cache call is planned (the forward and backward stop at 256).\n"
            "On an NVIDIA sm_90 device the forward plan at head_dim 64 and 128 (fp16/bf16)\n"
            "is the wgmma piece (variant nvidia-wgmma); FLASHCL_WGMMA=0 in the environment\n"
            "keeps it on mma.sync.\n");
}

static int parse_dtype(const char *s, fcl_dtype *out)
{
    if (strcmp(s, "fp32") == 0) *out = FCL_DTYPE_FP32;
    else if (strcmp(s, "fp16") == 0) *out = FCL_DTYPE_FP16;
    else if (strcmp(s, "bf16") == 0) *out = FCL_DTYPE_BF16;
    else if (strcmp(s, "e4m3") == 0) *out = FCL_DTYPE_FP8_E4M3;
    else if (strcmp(s, "e5m2") == 0) *out = FCL_DTYPE_FP8_E5M2;
    else return 0;
    return 1;
}

static int parse_size(const char *s, size_t *out)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (end == s || *end != '\0' || v == 0) return 0;
    *out = (size_t)v;
    return 1;
}

static const char *kernel_label(fcl_kernel_kind k)
{
    return k == FCL_KERNEL_FORWARD       ? "forward"
           : k == FCL_KERNEL_BACKWARD_DQ ? "backward-dq"
           : k == FCL_KERNEL_DECODE      ? "decode"
                                         : "backward-dkdv";
}

static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; ++s) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", (unsigned)(unsigned char)*s);
        else putchar(*s);
    }
    putchar('"');
}

static void print_device_text(const fcl_device_info *in, const char *where)
{
    const char *type = (in->type & CL_DEVICE_TYPE_GPU) ? "GPU"
                       : (in->type & CL_DEVICE_TYPE_CPU) ? "CPU" : "other";
    printf("%s  %s\n", where, in->name);
    printf("  platform %s, driver %s, %s, vendor id 0x%04x\n", in->platform_name,
           in->driver_version, type, (unsigned)in->vendor_id);
    printf("  compute units %u, max work-group %zu, SIMD width %u", (unsigned)in->compute_units,
           in->max_work_group_size, (unsigned)in->simd_width);
    if (in->nv_compute_capability)
        printf(", compute capability %d.%d", in->nv_compute_capability / 10,
               in->nv_compute_capability % 10);
    if (in->type & CL_DEVICE_TYPE_CPU) /* what the CPU piece sizes itself by */
        printf(", %u floats a SIMD vector, cache %.1f MiB", (unsigned)in->native_float_width,
               in->cache_bytes / 1048576.0);
    printf("\n  local memory (SRAM): reported %.1f KiB, usable %.1f KiB (%s)\n",
           in->local_mem_reported / 1024.0, in->local_mem_usable / 1024.0,
           in->profile_name ? "emulated profile"
           : in->local_mem_probed ? "probed with static __local arrays"
                                  : "as reported");
}

static void print_plan_text(const fcl_plan *p)
{
    printf("    %-14s paper Br x Bc = %4zu x %-6zu launched Br x Bc = %3zu x %-4zu "
           "work-group %4zu (%zux%zu)  local %.1f KiB  %s  [%s]\n",
           kernel_label(p->kernel), p->paper_br, p->paper_bc, p->br, p->bc, p->work_group_size,
           p->threads_row, p->threads_col, p->local_bytes / 1024.0, p->variant, p->source);
    if (p->num_splits > 1)
        printf("    %-14s launch: %zu query head(s) packed per row block, keys split in %zu chunks "
               "of %zu (merged by log-sum-exp)\n", "", p->pack, p->num_splits, p->split_keys);
    else
        printf("    %-14s launch: %zu query head(s) packed per row block, keys not split\n", "",
               p->pack);
    printf("    %-14s why: %s\n", "", p->reason);
}

static void print_device_json(const fcl_device_info *in)
{
    printf("{\"name\": ");
    print_json_string(in->name);
    printf(", \"platform\": ");
    print_json_string(in->platform_name);
    printf(", \"driver\": ");
    print_json_string(in->driver_version);
    printf(", \"type\": \"%s\", \"vendor_id\": %u, \"compute_units\": %u, "
           "\"max_work_group_size\": %zu, \"simd_width\": %u, \"nv_compute_capability\": %d, "
           "\"local_mem_reported\": %llu, \"local_mem_usable\": %llu, \"local_mem_probed\": %d, "
           "\"native_float_width\": %u, \"cache_bytes\": %llu, \"profile\": ",
           (in->type & CL_DEVICE_TYPE_GPU) ? "gpu" : (in->type & CL_DEVICE_TYPE_CPU) ? "cpu" : "other",
           (unsigned)in->vendor_id, (unsigned)in->compute_units, in->max_work_group_size,
           (unsigned)in->simd_width, in->nv_compute_capability,
           (unsigned long long)in->local_mem_reported, (unsigned long long)in->local_mem_usable,
           in->local_mem_probed, (unsigned)in->native_float_width,
           (unsigned long long)in->cache_bytes);
    if (in->profile_name) print_json_string(in->profile_name);
    else printf("null");
}

static void print_plan_json(const fcl_plan *p)
{
    printf("{\"kernel\": \"%s\", \"dtype\": \"%s\", \"head_dim\": %zu, \"head_dim_padded\": %zu, "
           "\"paper_m_elements\": %llu, \"paper_br\": %zu, \"paper_bc\": %zu, \"br\": %zu, "
           "\"bc\": %zu, \"work_group_size\": %zu, \"threads_row\": %zu, \"threads_col\": %zu, "
           "\"local_bytes\": %llu, ",
           kernel_label(p->kernel), fcl_dtype_name(p->dtype), p->head_dim, p->head_dim_padded,
           (unsigned long long)p->paper_m_elements, p->paper_br, p->paper_bc, p->br, p->bc,
           p->work_group_size, p->threads_row, p->threads_col,
           (unsigned long long)p->local_bytes);
    printf("\"pack\": %zu, \"num_splits\": %zu, \"split_keys\": %zu, \"variant\": ", p->pack,
           p->num_splits, p->split_keys);
    print_json_string(p->variant);
    printf(", \"source\": ");
    print_json_string(p->source);
    printf(", \"reason\": ");
    print_json_string(p->reason);
    printf("}");
}

/* Prints one device (or emulated profile) and its plans; 0 on success. */
static int show(const options *o, int platform, int device, const char *profile, int *first)
{
    fcl_context_options co;
    fcl_context_options_init(&co);
    co.platform_index = platform;
    co.device_index = device;
    co.profile = profile;
    co.skip_local_mem_probe = o->no_probe;
    fcl_context *ctx = NULL;
    fcl_status st = fcl_context_create(&co, &ctx);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-info: device %d:%d%s%s: %s\n", platform, device,
                profile ? " profile " : "", profile ? profile : "", fcl_status_string(st));
        return 1;
    }
    fcl_device_info info;
    fcl_context_device_info(ctx, &info);
    fcl_attention_desc desc;
    fcl_attention_desc_init(&desc, 1, 1, 1, o->seqlen_q, o->seqlen_k, o->head_dim, o->dtype,
                            FCL_LAYOUT_BSHD);
    desc.causal = o->causal;
    desc.sinks = o->sinks;
    desc.head_dim_v = o->head_dim_v;
    char where[96];
    if (profile)
        snprintf(where, sizeof where, "Profile %s (running on device %d:%d)", profile, platform,
                 device);
    else
        snprintf(where, sizeof where, "Device %d:%d", platform, device);
    if (o->json) {
        printf("%s  {\"index\": \"%d:%d\", \"device\": ", *first ? "" : ",\n", platform, device);
        print_device_json(&info);
        printf("}, \"plans\": [");
    } else {
        print_device_text(&info, where);
        printf("  plans for head_dim %zu", o->head_dim);
        if (o->head_dim_v) printf(" (V and O: head_dim_v %zu)", o->head_dim_v);
        printf(", %s, seqlen %zu x %zu%s%s:\n", fcl_dtype_name(o->dtype), o->seqlen_q,
               o->seqlen_k, o->causal ? ", causal" : "", o->sinks ? ", attention sinks" : "");
    }
    *first = 0;
    int rc = 0;
    const fcl_kernel_kind kinds[4] = {FCL_KERNEL_FORWARD, FCL_KERNEL_BACKWARD_DKDV,
                                      FCL_KERNEL_BACKWARD_DQ, FCL_KERNEL_DECODE};
    const int fp8 = fcl_dtype_size(o->dtype) == 1; /* forward only (flashcl.h) */
    for (int i = 0; i < 4; ++i) {
        fcl_plan plan;
        if (fp8 && kinds[i] != FCL_KERNEL_FORWARD)
            continue;
        if (o->head_dim > 256 && kinds[i] != FCL_KERNEL_DECODE)
            continue; /* the KV-cache call's alone (flashcl.h) */
        if (kinds[i] == FCL_KERNEL_DECODE) { /* a KV-cache call, contiguous cache */
            fcl_kvcache_desc kv;
            fcl_kvcache_desc_init(&kv, o->batch, o->heads_q, o->heads_kv, o->head_dim,
                                  o->decode_rows, 0, o->dtype);
            kv.head_dim_v = o->head_dim_v; /* before the cache's layouts, which use it */
            fcl_kvcache_desc_set_contiguous(&kv, o->seqlen_k);
            kv.causal = 1;
            kv.sinks = o->sinks;
            kv.rotary_dim = o->rotary_dim;
            kv.rotary_interleaved = o->rotary_interleaved;
            kv.rotary_rows = o->seqlen_k;
            kv.shared_kv = o->shared_kv;
            st = fcl_kvcache_plan_query(ctx, &kv, &plan);
        } else {
            st = fcl_plan_query(ctx, &desc, kinds[i], &plan);
        }
        if (st != FCL_OK) {
            fprintf(stderr, "flashcl-info: %s plan: %s\n", kernel_label(kinds[i]),
                    fcl_status_string(st));
            if (st == FCL_ERROR_BUILD_FAILED)
                fprintf(stderr, "%s\n", fcl_context_build_log(ctx));
            rc = 1;
            continue;
        }
        if (o->json) {
            printf("%s", i ? ", " : "");
            print_plan_json(&plan);
        } else {
            if (kinds[i] == FCL_KERNEL_DECODE)
                printf("  decode plan: KV-cache call, %zu sequence(s) of %zu cached keys, %zu query "
                       "row(s), %zu/%zu heads%s:\n", o->batch, o->seqlen_k, o->decode_rows,
                       o->heads_q, o->heads_kv,
                       o->shared_kv ? ", one shared K/V cache (V: its rows' first head_dim_v "
                                      "columns, one key tile for both)" : "");
            if (kinds[i] == FCL_KERNEL_DECODE && o->rotary_dim > 0)
                printf("    rotary %zu of %zu columns, %s pairs: the append step rotates Q into "
                       "a workspace of %zu bytes and the new K rows as it writes them\n",
                       o->rotary_dim, o->head_dim, o->rotary_interleaved ? "interleaved" : "half-split",
                       o->batch * o->decode_rows * o->heads_q * o->head_dim *
                           fcl_dtype_size(o->dtype));
            print_plan_text(&plan);
        }
    }
    if (o->json) printf("]}");
    else printf("\n");
    fcl_context_destroy(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    options o = {64, 4096, 0, 1, 32, 8, 1, 0, 0, FCL_DTYPE_FP32, 0, 0, 0, 0, NULL, NULL, 0, 0};
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) { usage(stdout); return 0; }
        else if (strcmp(a, "--json") == 0) o.json = 1;
        else if (strcmp(a, "--causal") == 0) o.causal = 1;
        else if (strcmp(a, "--sinks") == 0) o.sinks = 1;
        else if (strcmp(a, "--shared-kv") == 0) o.shared_kv = 1;
        else if (strcmp(a, "--no-probe") == 0) o.no_probe = 1;
        else if (strcmp(a, "--rotary-interleaved") == 0) o.rotary_interleaved = 1;
        else if (strcmp(a, "--list-profiles") == 0) {
            for (size_t p = 0; p < fcl_profile_count(); ++p)
                printf("%-12s %s\n", fcl_profile_name(p), fcl_profile_description(p));
            return 0;
        } else if (v != NULL && strcmp(a, "--head-dim") == 0 && parse_size(v, &o.head_dim)) ++i;
        else if (v != NULL && strcmp(a, "--head-dim-v") == 0 && parse_size(v, &o.head_dim_v)) ++i;
        else if (v != NULL && strcmp(a, "--seqlen") == 0 && parse_size(v, &o.seqlen_q)) ++i;
        else if (v != NULL && strcmp(a, "--seqlen-k") == 0 && parse_size(v, &o.seqlen_k)) ++i;
        else if (v != NULL && strcmp(a, "--dtype") == 0 && parse_dtype(v, &o.dtype)) ++i;
        else if (v != NULL && strcmp(a, "--batch") == 0 && parse_size(v, &o.batch)) ++i;
        else if (v != NULL && strcmp(a, "--heads-q") == 0 && parse_size(v, &o.heads_q)) ++i;
        else if (v != NULL && strcmp(a, "--heads-kv") == 0 && parse_size(v, &o.heads_kv)) ++i;
        else if (v != NULL && strcmp(a, "--decode-rows") == 0 && parse_size(v, &o.decode_rows)) ++i;
        else if (v != NULL && strcmp(a, "--rotary-dim") == 0 && parse_size(v, &o.rotary_dim)) ++i;
        else if (v != NULL && strcmp(a, "--device") == 0) { o.device = v; ++i; }
        else if (v != NULL && strcmp(a, "--profile") == 0) { o.profile = v; ++i; }
        else { fprintf(stderr, "flashcl-info: bad argument '%s'\n", a); usage(stderr); return 2; }
    }
    if (o.seqlen_k == 0) o.seqlen_k = o.seqlen_q;

    size_t count = 0;
    fcl_status st = fcl_list_devices(NULL, 0, &count);
    if (st != FCL_OK || count == 0) {
        fprintf(stderr, "flashcl-info: no OpenCL device (%s)\n",
                st != FCL_OK ? fcl_status_string(st) : "no platform installed");
        return 1;
    }
    fcl_device_ref *refs = calloc(count, sizeof *refs);
    if (refs == NULL) return 1;
    st = fcl_list_devices(refs, count, &count);
    if (st != FCL_OK) {
        fprintf(stderr, "flashcl-info: %s\n", fcl_status_string(st));
        free(refs);
        return 1;
    }
    int rc = 0, first = 1;
    if (o.json) printf("{\"flashcl_version\": \"%s\", \"devices\": [\n", fcl_version_string());
    int only_p = -1, only_d = -1;
    if (o.device != NULL && sscanf(o.device, "%d:%d", &only_p, &only_d) != 2) {
        fprintf(stderr, "flashcl-info: --device wants P:D\n");
        free(refs);
        return 2;
    }
    if (o.profile != NULL) {
        /* Emulated profiles run on the chosen device, or the default one. */
        int p = only_p, d = only_d;
        for (size_t i = 0; i < fcl_profile_count(); ++i) {
            const char *name = fcl_profile_name(i);
            if (strcmp(o.profile, "all") == 0 || strcmp(o.profile, name) == 0)
                rc |= show(&o, p, d, name, &first);
        }
        if (first) {
            fprintf(stderr, "flashcl-info: no profile named '%s' (see --list-profiles)\n",
                    o.profile);
            rc = 1;
        }
    } else {
        for (size_t i = 0; i < count; ++i) {
            if (only_p >= 0 && (refs[i].platform_index != only_p || refs[i].device_index != only_d))
                continue;
            rc |= show(&o, refs[i].platform_index, refs[i].device_index, NULL, &first);
        }
    }
    if (o.json) printf("\n]}\n");
    free(refs);
    return rc;
}
