/* disk_cache.c - compiled programs kept on disk, so that a new process does
 * not build its kernels again (0.4-1.1 s a program on an H100).
 *
 * The folder: fcl_context_options.cache_dir, else the FLASHCL_CACHE_DIR
 * environment variable ("off": none), else, for GPUs, $XDG_CACHE_HOME/flashcl
 * or $HOME/.cache/flashcl; created with its parents.  CPUs get no default
 * folder: PoCL keeps its own kernel cache, and reading a program's binary
 * back makes it compile every kernel of the program at once (a test suite
 * that builds plans without launching them took minutes instead of
 * seconds).
 *
 * An entry is one file, flashcl-<16 hex digits>.bin, the digits a hash of
 * its key (device, driver, platform, program, build options and a hash of
 * the kernel sources):
 *     "FCLK" | format (u32) | key length (u32) | binary length (u64) |
 *     checksum of key and binary (u64) | key | binary
 * An entry is used only when every field matches what this context would
 * build: a truncated, corrupt or foreign file (another key under the same
 * name) is ignored, rebuilt from source and replaced, and a binary the
 * driver refuses is rebuilt too.  Entries are written to a file of this
 * process and context, then renamed into place: readers see whole entries
 * only, and processes writing the same entry at once each leave a whole one.
 * After a store, the least recently used entries (loads refresh an entry's
 * time) go until the folder's entries fit the context's size bound.  The
 * disk is best effort: a folder that cannot be read or written costs a
 * rebuild, never a failed call.
 *
 * The folder also keeps each device's probed on-chip memory
 * (flashcl-probe-<hash>.txt: key, bytes, checksum): the probe builds a
 * dozen kernels, 2.6 s of context creation on an H100 (30 s with the
 * driver's own cache off), and its answer only changes with the driver.
 */
#define _POSIX_C_SOURCE 200809L /* opendir, stat, utimensat, getpid */

#include "device/context.h"
#include "programs/programs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { FORMAT = 1, HEADER_BYTES = 4 + 4 + 4 + 8 + 8, KEY_BYTES = 2048, PATH_BYTES = 4096 };
static const char MAGIC[4] = {'F', 'C', 'L', 'K'};
#define DEFAULT_MAX_BYTES ((uint64_t)256 << 20)
#define MAX_ENTRY_BYTES ((uint64_t)1 << 30)
/* a temporary file this old is left from a process that died mid-store */
#define STALE_TEMP_SECONDS 600

/* mkdir -p; 0 when the folder exists afterwards */
static int make_dirs(const char *path)
{
    char buf[PATH_BYTES];
    const size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p != '\0'; ++p) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    return stat(buf, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

/* The folder the environment names, into buf; false for none.  Only a
 * GPU gets a default one (see the top of this file). */
static bool environment_dir(char *buf, size_t size, bool gpu)
{
    const char *env = getenv("FLASHCL_CACHE_DIR");
    if (env != NULL && env[0] != '\0') {
        if (strcmp(env, "off") == 0)
            return false;
        return snprintf(buf, size, "%s", env) < (int)size;
    }
    if (!gpu)
        return false;
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg != NULL && xdg[0] == '/') /* the XDG rule: relative paths are ignored */
        return snprintf(buf, size, "%s/flashcl", xdg) < (int)size;
    const char *home = getenv("HOME");
    if (home != NULL && home[0] == '/')
        return snprintf(buf, size, "%s/.cache/flashcl", home) < (int)size;
    return false;
}

fcl_status fcl_disk_cache_setup(fcl_context *ctx, const fcl_context_options *opts)
{
    ctx->cache_max_bytes = opts->cache_max_bytes > 0 ? opts->cache_max_bytes : DEFAULT_MAX_BYTES;
    if (!opts->disk_cache)
        return FCL_OK;
    char dir[PATH_BYTES];
    if (opts->cache_dir != NULL) {
        /* the caller asked for this folder: not having it is an error */
        if (make_dirs(opts->cache_dir) != 0)
            return FCL_ERROR_INVALID_VALUE;
        fcl_copy_string(dir, sizeof dir, opts->cache_dir);
    } else if (!environment_dir(dir, sizeof dir, (ctx->info.type & CL_DEVICE_TYPE_GPU) != 0) ||
               make_dirs(dir) != 0) {
        return FCL_OK; /* a default that cannot be had means no disk cache */
    }
    ctx->cache_dir = fcl_strdup(dir);
    return ctx->cache_dir != NULL ? FCL_OK : FCL_ERROR_OUT_OF_HOST_MEMORY;
}

const char *fcl_context_cache_dir(const fcl_context *ctx)
{
    return ctx != NULL ? ctx->cache_dir : NULL;
}

/* ---- entries ---------------------------------------------------------------- */

static void entry_key(const fcl_context *ctx, fcl_program_id id, const char *options, char *key,
                      size_t size)
{
    const char *srcs[16];
    const size_t n = fcl_program_sources(id, srcs, 16);
    uint64_t h = 0;
    for (size_t i = 0; i < n; ++i)
        h = fcl_hash64(h, srcs[i], strlen(srcs[i]));
    snprintf(key, size, "flashcl kernels %d\n%s\n%s\n%s\n%d\n%s\n%016llx", FORMAT,
             ctx->info.name, ctx->info.driver_version, ctx->info.platform_name, (int)id, options,
             (unsigned long long)h);
}

static void entry_path(const fcl_context *ctx, const char *key, char *path, size_t size)
{
    snprintf(path, size, "%s/flashcl-%016llx.bin", ctx->cache_dir,
             (unsigned long long)fcl_hash64(0, key, strlen(key)));
}

static uint64_t entry_checksum(const char *key, size_t key_len, const unsigned char *bin,
                               size_t bin_len)
{
    return fcl_hash64(fcl_hash64(0x666c617368636cull, key, key_len), bin, bin_len);
}

/* The whole file, or NULL (missing, unreadable, or implausibly large). */
static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    unsigned char *data = NULL;
    long n = 0;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && (uint64_t)n <= MAX_ENTRY_BYTES &&
        fseek(f, 0, SEEK_SET) == 0 && (data = fcl_host_malloc((size_t)n)) != NULL &&
        fread(data, 1, (size_t)n, f) != (size_t)n) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len = (size_t)n;
    return data;
}

/* The binary of a well-formed entry for `key`, inside data; NULL otherwise. */
static const unsigned char *entry_binary(const unsigned char *data, size_t len, const char *key,
                                         size_t *bin_len)
{
    if (len < HEADER_BYTES || memcmp(data, MAGIC, 4) != 0)
        return NULL;
    uint32_t format = 0, key_len = 0;
    uint64_t blen = 0, checksum = 0;
    memcpy(&format, data + 4, 4);
    memcpy(&key_len, data + 8, 4);
    memcpy(&blen, data + 12, 8);
    memcpy(&checksum, data + 20, 8);
    const size_t want_key = strlen(key);
    if (format != FORMAT || key_len != want_key || len - HEADER_BYTES < key_len || blen == 0 ||
        blen != (uint64_t)(len - HEADER_BYTES - key_len) ||
        memcmp(data + HEADER_BYTES, key, want_key) != 0)
        return NULL;
    const unsigned char *bin = data + HEADER_BYTES + key_len;
    if (entry_checksum(key, key_len, bin, (size_t)blen) != checksum)
        return NULL;
    *bin_len = (size_t)blen;
    return bin;
}

cl_program fcl_disk_cache_load(fcl_context *ctx, fcl_program_id id, const char *options)
{
    if (ctx->cache_dir == NULL)
        return NULL;
    char key[KEY_BYTES], path[PATH_BYTES];
    entry_key(ctx, id, options, key, sizeof key);
    entry_path(ctx, key, path, sizeof path);
    size_t len = 0, bin_len = 0;
    unsigned char *data = read_file(path, &len);
    if (data == NULL)
        return NULL;
    cl_program prog = NULL;
    const unsigned char *bin = entry_binary(data, len, key, &bin_len);
    if (bin != NULL) {
        cl_int bin_status = CL_SUCCESS, err = CL_SUCCESS;
        prog = clCreateProgramWithBinary(ctx->cl_ctx, 1, &ctx->device, &bin_len, &bin,
                                         &bin_status, &err);
        if (err != CL_SUCCESS || bin_status != CL_SUCCESS ||
            clBuildProgram(prog, 1, &ctx->device, options, NULL, NULL) != CL_SUCCESS) {
            if (prog != NULL)
                clReleaseProgram(prog); /* the driver refuses it: build from source */
            prog = NULL;
        }
    }
    free(data);
    if (prog != NULL) {
        utimensat(AT_FDCWD, path, NULL, 0); /* recently used: evicted last */
        ctx->cache_loads++;
    }
    return prog;
}

/* ---- size bound --------------------------------------------------------------- */

typedef struct cached_file {
    char name[64];
    uint64_t bytes;
    struct timespec used;
} cached_file;

static int older_first(const void *a, const void *b)
{
    const cached_file *x = a, *y = b;
    if (x->used.tv_sec != y->used.tv_sec)
        return x->used.tv_sec < y->used.tv_sec ? -1 : 1;
    if (x->used.tv_nsec != y->used.tv_nsec)
        return x->used.tv_nsec < y->used.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

static bool is_entry(const char *name)
{
    const size_t n = strlen(name);
    return strncmp(name, "flashcl-", 8) == 0 && n == 8 + 16 + 4 && strcmp(name + n - 4, ".bin") == 0;
}

static bool is_temp(const char *name)
{
    return strncmp(name, "flashcl-", 8) == 0 && strstr(name, ".tmp.") != NULL;
}

/* Removes the least recently used entries until the rest fit the bound, and
 * temporary files left by processes that died while storing. */
static void evict(const fcl_context *ctx)
{
    DIR *dir = opendir(ctx->cache_dir);
    if (dir == NULL)
        return;
    cached_file *files = NULL;
    size_t n = 0, cap = 0;
    uint64_t total = 0;
    const time_t now = time(NULL);
    char path[PATH_BYTES];
    for (struct dirent *e; (e = readdir(dir)) != NULL;) {
        const bool entry = is_entry(e->d_name), temp = !entry && is_temp(e->d_name);
        if (!entry && !temp)
            continue;
        snprintf(path, sizeof path, "%s/%s", ctx->cache_dir, e->d_name);
        struct stat st;
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (temp) {
            if (now - st.st_mtime > STALE_TEMP_SECONDS)
                remove(path);
            continue;
        }
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            cached_file *grown = fcl_host_realloc(files, cap * sizeof *files);
            if (grown == NULL)
                break;
            files = grown;
        }
        fcl_copy_string(files[n].name, sizeof files[n].name, e->d_name);
        files[n].bytes = (uint64_t)st.st_size;
        files[n].used = st.st_mtim;
        total += files[n].bytes;
        ++n;
    }
    closedir(dir);
    if (total > ctx->cache_max_bytes && files != NULL) {
        qsort(files, n, sizeof *files, older_first);
        for (size_t i = 0; i < n && total > ctx->cache_max_bytes; ++i) {
            snprintf(path, sizeof path, "%s/%s", ctx->cache_dir, files[i].name);
            if (remove(path) == 0)
                total -= files[i].bytes;
        }
    }
    free(files);
}

/* ---- storing ----------------------------------------------------------------- */

static bool write_entry(const char *tmp, const char *key, const unsigned char *bin, size_t bin_len)
{
    const uint32_t format = FORMAT, key_len = (uint32_t)strlen(key);
    const uint64_t blen = bin_len, checksum = entry_checksum(key, key_len, bin, bin_len);
    unsigned char header[HEADER_BYTES];
    memcpy(header, MAGIC, 4);
    memcpy(header + 4, &format, 4);
    memcpy(header + 8, &key_len, 4);
    memcpy(header + 12, &blen, 8);
    memcpy(header + 20, &checksum, 8);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return false;
    bool ok = fwrite(header, 1, sizeof header, f) == sizeof header &&
              fwrite(key, 1, key_len, f) == key_len && fwrite(bin, 1, bin_len, f) == bin_len;
    ok = fclose(f) == 0 && ok;
    return ok;
}

void fcl_disk_cache_store(fcl_context *ctx, fcl_program_id id, const char *options,
                          cl_program prog)
{
    if (ctx->cache_dir == NULL)
        return;
    unsigned char *bin = NULL;
    size_t len = 0;
    if (fcl_program_binary(prog, &bin, &len) != FCL_OK)
        return;
    if ((uint64_t)len > MAX_ENTRY_BYTES) {
        free(bin);
        return;
    }
    char key[KEY_BYTES], path[PATH_BYTES], tmp[PATH_BYTES + 64];
    entry_key(ctx, id, options, key, sizeof key);
    entry_path(ctx, key, path, sizeof path);
    /* unique to this process and context, so concurrent writers never share it */
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p.%u", path, (long)getpid(), (void *)ctx,
             ctx->cache_stores);
    if (write_entry(tmp, key, bin, len) && rename(tmp, path) == 0)
        ctx->cache_stores++;
    else
        remove(tmp);
    evict(ctx);
    free(bin);
}

/* ---- the on-chip memory probe's answer ------------------------------------------ */

static void probe_key(const fcl_context *ctx, char *key, size_t size, char *path, size_t psize)
{
    snprintf(key, size, "flashcl local memory probe %d\n%s\n%s\n%s\n%llu", FORMAT,
             ctx->info.name, ctx->info.driver_version, ctx->info.platform_name,
             (unsigned long long)ctx->info.local_mem_reported);
    snprintf(path, psize, "%s/flashcl-probe-%016llx.txt", ctx->cache_dir,
             (unsigned long long)fcl_hash64(0, key, strlen(key)));
}

static uint64_t probe_checksum(const char *key, unsigned long long bytes)
{
    return fcl_hash64(fcl_hash64(0x70726f6265ull, key, strlen(key)), &bytes, sizeof bytes);
}

bool fcl_disk_cache_load_probe(const fcl_context *ctx, uint64_t *usable)
{
    if (ctx->cache_dir == NULL)
        return false;
    char key[KEY_BYTES], path[PATH_BYTES], text[KEY_BYTES + 64];
    probe_key(ctx, key, sizeof key, path, sizeof path);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return false;
    const size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    /* key, then "\n<bytes> <checksum>\n" and nothing else */
    const size_t key_len = strlen(key);
    unsigned long long bytes = 0, checksum = 0;
    char end = 0;
    if (n <= key_len || memcmp(text, key, key_len) != 0 ||
        sscanf(text + key_len, "\n%llu %llx%c", &bytes, &checksum, &end) != 3 || end != '\n' ||
        checksum != probe_checksum(key, bytes) || bytes < ctx->info.local_mem_reported ||
        bytes > ((uint64_t)4 << 20))
        return false;
    *usable = bytes;
    return true;
}

void fcl_disk_cache_store_probe(fcl_context *ctx, uint64_t usable)
{
    if (ctx->cache_dir == NULL)
        return;
    char key[KEY_BYTES], path[PATH_BYTES], tmp[PATH_BYTES + 64];
    probe_key(ctx, key, sizeof key, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%p", path, (long)getpid(), (void *)ctx);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return;
    const unsigned long long bytes = usable;
    int ok = fprintf(f, "%s\n%llu %llx\n", key, bytes,
                     (unsigned long long)probe_checksum(key, bytes)) > 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}
