/* ptx_rewrite.c - sm_90a programs from OpenCL C: the step that lets a kernel
 * use Hopper-only PTX (wgmma, setmaxnreg) through NVIDIA's OpenCL compiler.
 *
 * That compiler emits PTX for `.target sm_90` whatever it is asked, and ptxas
 * refuses the Hopper-only instructions there.  So a kernel writes each such
 * instruction as a comment line of its inline assembly,
 *
 *     asm volatile("// @sm90a@ wgmma.fence.sync.aligned;" ::: "memory");
 *
 * whose %0, %1 ... the compiler fills in like any asm operand (the register
 * allocator wires them; a comment costs nothing).  A program built with
 * FCL_SM90A_OPTION among its options is then built once from source, its PTX
 * read back (CL_PROGRAM_BINARIES), retargeted to sm_90a with every marked
 * comment turned into its instruction, and built again as a binary program.
 * The program cache keeps the result like any program (in memory and on
 * disk: the binary read back is the patched PTX).
 *
 * Only an NVIDIA device of compute capability 9.0 gets it: anywhere else the
 * build fails with a log that says why, before any compiler runs.  Measured
 * on an H200 with a minimal kernel (shared/device/NOTES.md): wgmma from
 * shared-memory descriptors, mbarriers and bulk copies run correctly.
 */
#include "device/context.h"
#include "programs/programs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_blank(char c) { return c == ' ' || c == '\t'; }

static int is_name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_';
}

/* Where the line starting at `p` ends (its '\n', or `end`). */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    return nl != NULL ? nl : end;
}

/* The line's placeholder: 1 and *instr, *instr_end around the instruction
 * text (kept as it is, up to the line's end) when the line's first
 * non-blank text is the marker; 0 when the line has no marker; -1 when the
 * marker comes after other text, where the compiler would keep it a comment. */
static int placeholder(const char *line, const char *eol, const char **instr,
                       const char **instr_end)
{
    static const size_t marker_len = sizeof FCL_SM90A_MARKER - 1;
    const char *p = line;
    while (p < eol && is_blank(*p))
        ++p;
    if ((size_t)(eol - p) < marker_len || memcmp(p, FCL_SM90A_MARKER, marker_len) != 0) {
        for (const char *q = p; (size_t)(eol - q) >= marker_len; ++q)
            if (memcmp(q, FCL_SM90A_MARKER, marker_len) == 0)
                return -1;
        return 0;
    }
    p += marker_len;
    while (p < eol && is_blank(*p))
        ++p;
    *instr = p;
    *instr_end = eol;
    return 1;
}

/* 1 when [p, e) holds only blanks and carriage returns */
static int is_empty(const char *p, const char *e)
{
    while (p < e && (is_blank(*p) || *p == '\r'))
        ++p;
    return p == e;
}

/* A `.target` line: 1 and the first target's name in [*name, *name_end),
 * else 0. */
static int target_directive(const char *line, const char *eol, const char **name,
                            const char **name_end)
{
    const char *p = line;
    while (p < eol && is_blank(*p))
        ++p;
    if ((size_t)(eol - p) < 8 || memcmp(p, ".target", 7) != 0 || !is_blank(p[7]))
        return 0;
    p += 7;
    while (p < eol && is_blank(*p))
        ++p;
    const char *e = p;
    while (e < eol && is_name_char(*e))
        ++e;
    *name = p;
    *name_end = e;
    return 1;
}

static int name_is(const char *p, const char *e, const char *s)
{
    return (size_t)(e - p) == strlen(s) && memcmp(p, s, (size_t)(e - p)) == 0;
}

fcl_status fcl_ptx_to_sm90a(const char *ptx, size_t len, char **out, size_t *out_len,
                            size_t *rewritten, char *why, size_t why_size)
{
    *out = NULL;
    *out_len = 0;
    *rewritten = 0;
    fcl_copy_string(why, why_size, "");
    /* a binary read back may end in its terminating zero */
    const char *nul = memchr(ptx, '\0', len);
    const char *end = nul != NULL ? nul : ptx + len;

    /* One pass to check, so that nothing is allocated for bad text: exactly
     * one .target directive, naming sm_90 (or sm_90a: already done), and no
     * empty placeholder. */
    size_t targets = 0, places = 0, line_no = 0;
    int retarget = 0;
    for (const char *line = ptx; line < end; ++line_no) {
        const char *eol = line_end(line, end), *a, *b;
        if (target_directive(line, eol, &a, &b)) {
            ++targets;
            if (!name_is(a, b, "sm_90") && !name_is(a, b, "sm_90a")) {
                snprintf(why, why_size,
                         "sm_90a PTX rewrite: the PTX targets %.*s, not sm_90 (line %zu)",
                         (int)(b - a > 32 ? 32 : b - a), a, line_no + 1);
                return FCL_ERROR_BUILD_FAILED;
            }
            retarget = name_is(a, b, "sm_90");
        } else {
            const int kind = placeholder(line, eol, &a, &b);
            if (kind != 0 && (kind < 0 || is_empty(a, b))) {
                snprintf(why, why_size,
                         kind < 0 ? "sm_90a PTX rewrite: a marker after other text at line %zu "
                                    "(it must begin its line of the asm)"
                                  : "sm_90a PTX rewrite: a marker without an instruction at "
                                    "line %zu",
                         line_no + 1);
                return FCL_ERROR_BUILD_FAILED;
            }
            if (kind > 0)
                ++places;
        }
        line = eol < end ? eol + 1 : end;
    }
    if (targets != 1) {
        snprintf(why, why_size,
                 "sm_90a PTX rewrite: %zu .target directives in the compiler's output "
                 "(expected one: is it PTX?)",
                 targets);
        return FCL_ERROR_BUILD_FAILED;
    }

    /* The rewrite only shortens lines, but for the 'a' of sm_90a. */
    const size_t cap = (size_t)(end - ptx) + 2;
    char *buf = fcl_host_malloc(cap);
    if (buf == NULL)
        return FCL_ERROR_OUT_OF_HOST_MEMORY;
    char *w = buf;
    for (const char *line = ptx; line < end;) {
        const char *eol = line_end(line, end), *a, *b;
        if (placeholder(line, eol, &a, &b) > 0) {
            const char *indent_end = line;
            while (is_blank(*indent_end))
                ++indent_end;
            memcpy(w, line, (size_t)(indent_end - line));
            w += indent_end - line;
            memcpy(w, a, (size_t)(b - a));
            w += b - a;
        } else if (retarget && target_directive(line, eol, &a, &b)) {
            memcpy(w, line, (size_t)(b - line));
            w += b - line;
            *w++ = 'a';
            memcpy(w, b, (size_t)(eol - b));
            w += eol - b;
        } else {
            memcpy(w, line, (size_t)(eol - line));
            w += eol - line;
        }
        if (eol < end)
            *w++ = '\n';
        line = eol < end ? eol + 1 : end;
    }
    *w = '\0';
    *out = buf;
    *out_len = (size_t)(w - buf);
    *rewritten = places;
    return FCL_OK;
}

int fcl_wants_sm90a(const char *options)
{
    return options != NULL && strstr(options, FCL_SM90A_OPTION) != NULL;
}

fcl_status fcl_sm90a_device_check(const fcl_context *ctx)
{
    const fcl_device_info *d = &ctx->info;
    if (d->vendor_id == FCL_VENDOR_ID_NVIDIA && d->nv_compute_capability == 90)
        return FCL_OK;
    char log[512];
    snprintf(log, sizeof log,
             "sm_90a PTX rewrite: asked for on %.255s (vendor 0x%x, compute capability %d); "
             "only NVIDIA sm_90 devices take sm_90a PTX",
             d->name, (unsigned)d->vendor_id, d->nv_compute_capability);
    fcl_set_build_log((fcl_context *)ctx, log);
    return FCL_ERROR_BUILD_FAILED;
}

fcl_status fcl_build_sm90a(fcl_context *ctx, cl_program from_source, const char *options,
                           cl_program *out)
{
    *out = NULL;
    unsigned char *ptx = NULL;
    size_t len = 0;
    fcl_status st = fcl_program_binary(from_source, &ptx, &len);
    if (st != FCL_OK)
        return st;
    char *patched = NULL, why[256];
    size_t patched_len = 0, rewritten = 0;
    st = fcl_ptx_to_sm90a((const char *)ptx, len, &patched, &patched_len, &rewritten, why,
                          sizeof why);
    free(ptx);
    if (st != FCL_OK) {
        if (st == FCL_ERROR_BUILD_FAILED)
            fcl_set_build_log(ctx, why);
        return st;
    }
    const unsigned char *bins[1] = {(const unsigned char *)patched};
    cl_int bin_status = CL_SUCCESS, err = CL_SUCCESS;
    cl_program prog = clCreateProgramWithBinary(ctx->cl_ctx, 1, &ctx->device, &patched_len, bins,
                                                &bin_status, &err);
    free(patched);
    if (err != CL_SUCCESS)
        return err;
    st = fcl_build_or_release(ctx, prog, options);
    if (st == FCL_OK)
        *out = prog;
    return st;
}
