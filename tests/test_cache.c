/* test_cache - compiled kernels on disk (fcl_context_options.cache_dir and
 * the header's rules): which folder a context takes from the options and
 * the environment, that a second context loads what the first stored and
 * computes the same, that damaged and foreign entries are rebuilt and
 * replaced, the size bound, the on-chip memory probe's answer kept beside
 * the kernels, and several processes filling one folder at
 * once (this program started again as a child, so that each process
 * starts its OpenCL runtime fresh).
 */
#define _XOPEN_SOURCE 700 /* setenv, mkdtemp, posix_spawn, nftw */

#include "internal.h"
#include "test_support.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>
#include <dirent.h>
#include <ftw.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;
static const char *self_path;

/* B Hq Hk Sq Sk d dtype causal ... : small, two programs with the backward */
static const fa_case small = {1, 2, 2, 40, 40, 16, FCL_DTYPE_FP32, 1, 0, FCL_LAYOUT_BSHD, 0,
                              {0, 0, 0}, 31, NULL};

static void temp_dir(char *buf, size_t size)
{
    snprintf(buf, size, "/tmp/flashcl-cache-test-XXXXXX");
    assert_non_null(mkdtemp(buf));
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static void remove_tree(const char *dir) { nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS); }

static fcl_context *cache_context(const char *dir, uint64_t max_bytes)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.cache_dir = dir;
    o.cache_max_bytes = max_bytes;
    fcl_context *ctx = NULL;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
    return ctx;
}

/* A kernel entry's name: flashcl-<16 hex digits>.bin (the folder also
 * holds the probe's answer on GPUs, and temporary files while storing). */
static bool is_kernel_entry(const char *name)
{
    return strncmp(name, "flashcl-", 8) == 0 && strlen(name) == 8 + 16 + 4 &&
           strcmp(name + 24, ".bin") == 0;
}

/* The folder's entries: count, total bytes, largest; temporary files count. */
typedef struct folder {
    int entries, temps;
    uint64_t bytes, largest;
    char first[700];
} folder;

static folder scan(const char *dir)
{
    folder f = {0, 0, 0, 0, ""};
    DIR *d = opendir(dir);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "flashcl-", 8) != 0)
            continue;
        if (strstr(e->d_name, ".tmp.") != NULL) {
            f.temps++;
            continue;
        }
        if (!is_kernel_entry(e->d_name))
            continue;
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        assert_int_equal(stat(path, &st), 0);
        f.entries++;
        f.bytes += (uint64_t)st.st_size;
        if ((uint64_t)st.st_size > f.largest)
            f.largest = (uint64_t)st.st_size;
        if (f.first[0] == '\0')
            snprintf(f.first, sizeof f.first, "%s", path);
    }
    closedir(d);
    return f;
}

/* Runs the forward and backward on ctx, checked; returns (loads, stores). */
static void run_and_count(fcl_context *ctx, unsigned *loads, unsigned *stores)
{
    fa_result r;
    assert_true(fa_check_forward(ctx, &small, &r));
    assert_true(fa_check_backward(ctx, &small, &r));
    fcl_debug_disk_cache_counts(ctx, loads, stores);
}

static void test_second_context_loads(void **state)
{
    (void)state;
    char dir[64];
    temp_dir(dir, sizeof dir);
    unsigned loads = 0, stores = 0;
    fcl_context *ctx = cache_context(dir, 0);
    assert_string_equal(fcl_context_cache_dir(ctx), dir);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    assert_int_equal(loads, 0);
    assert_true(stores >= 2); /* the forward's program and the backward's */
    const folder f = scan(dir);
    assert_int_equal(f.entries, (int)stores);
    assert_int_equal(f.temps, 0);

    ctx = cache_context(dir, 0);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    assert_int_equal(loads, (unsigned)f.entries); /* every program from disk, right results */
    assert_int_equal(stores, 0);
    remove_tree(dir);
}

/* The environment as it was, put back after test_folder_choice (PoCL
 * keeps its own cache under XDG_CACHE_HOME or HOME too: the test runs in
 * its temporary folder, where a relative XDG_CACHE_HOME lands). */
static char *saved_env(const char *name)
{
    const char *v = getenv(name);
    return v != NULL ? strdup(v) : NULL;
}

static void restore_env(const char *name, char *value)
{
    if (value != NULL)
        setenv(name, value, 1);
    else
        unsetenv(name);
    free(value);
}

static void test_folder_choice(void **state)
{
    (void)state;
    char base[64], want[200], cwd[4096];
    temp_dir(base, sizeof base);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(base), 0);
    char *home = saved_env("HOME"), *xdg = saved_env("XDG_CACHE_HOME");
    fcl_context *ctx = NULL;

    snprintf(want, sizeof want, "%s/env/a/b", base);
    assert_int_equal(setenv("FLASHCL_CACHE_DIR", want, 1), 0);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    assert_string_equal(fcl_context_cache_dir(ctx), want); /* created with its parents */
    fcl_context_destroy(ctx);

    assert_int_equal(setenv("FLASHCL_CACHE_DIR", "off", 1), 0);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    assert_null(fcl_context_cache_dir(ctx));
    fcl_context_destroy(ctx);

    /* the default folder: a GPU's only */
    assert_int_equal(unsetenv("FLASHCL_CACHE_DIR"), 0);
    snprintf(want, sizeof want, "%s/xdg", base);
    assert_int_equal(setenv("XDG_CACHE_HOME", want, 1), 0);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    fcl_device_info info;
    assert_int_equal(fcl_context_device_info(ctx, &info), FCL_OK);
    const bool gpu = (info.type & CL_DEVICE_TYPE_GPU) != 0;
    strcat(want, "/flashcl");
    if (gpu)
        assert_string_equal(fcl_context_cache_dir(ctx), want);
    else
        assert_null(fcl_context_cache_dir(ctx));
    fcl_context_destroy(ctx);

    assert_int_equal(setenv("XDG_CACHE_HOME", "relative/ignored", 1), 0);
    snprintf(want, sizeof want, "%s/home", base);
    assert_int_equal(setenv("HOME", want, 1), 0);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    strcat(want, "/.cache/flashcl");
    if (gpu)
        assert_string_equal(fcl_context_cache_dir(ctx), want);
    else
        assert_null(fcl_context_cache_dir(ctx));
    fcl_context_destroy(ctx);

    /* a default that cannot be created: no disk cache, the context works */
    snprintf(want, sizeof want, "%s/file", base);
    FILE *f = fopen(want, "w");
    assert_non_null(f);
    fclose(f);
    char below_file[300];
    snprintf(below_file, sizeof below_file, "%s/below", want);
    assert_int_equal(setenv("FLASHCL_CACHE_DIR", below_file, 1), 0);
    assert_int_equal(fcl_context_create(NULL, &ctx), FCL_OK);
    assert_null(fcl_context_cache_dir(ctx));
    fcl_context_destroy(ctx);

    /* ... but the caller's own folder is an error */
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.cache_dir = below_file;
    ctx = NULL;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_ERROR_INVALID_VALUE);
    assert_null(ctx);

    /* disk_cache = 0 beats every folder setting */
    o.cache_dir = base;
    o.disk_cache = 0;
    assert_int_equal(fcl_context_create(&o, &ctx), FCL_OK);
    assert_null(fcl_context_cache_dir(ctx));
    fcl_context_destroy(ctx);
    assert_int_equal(unsetenv("FLASHCL_CACHE_DIR"), 0);
    restore_env("HOME", home);
    restore_env("XDG_CACHE_HOME", xdg);
    assert_int_equal(chdir(cwd), 0);
    remove_tree(base);
}

/* Rewrites one entry of dir with `damage`, then checks that a context
 * rebuilds it (right results), replaces it, and that the next one loads it. */
static void check_rebuilt(const char *dir, void (*damage)(const char *path, const char *other))
{
    const folder f = scan(dir);
    assert_true(f.entries >= 2);
    char other[700] = "";
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (is_kernel_entry(e->d_name) && strcmp(path, f.first) != 0) {
            snprintf(other, sizeof other, "%s", path);
            break;
        }
    }
    closedir(d);
    damage(f.first, other);
    unsigned loads = 0, stores = 0;
    fcl_context *ctx = cache_context(dir, 0);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    assert_int_equal(stores, 1);
    assert_int_equal(loads, (unsigned)f.entries - 1);
    ctx = cache_context(dir, 0);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    assert_int_equal(stores, 0);
    assert_int_equal(loads, (unsigned)f.entries);
}

static void truncate_half(const char *path, const char *other)
{
    (void)other;
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(truncate(path, st.st_size / 2), 0);
}

static void flip_last_byte(const char *path, const char *other)
{
    (void)other;
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    const int c = fgetc(f);
    assert_int_equal(fseek(f, -1, SEEK_END), 0);
    fputc(c ^ 0x5a, f);
    fclose(f);
}

static void copy_other_entry(const char *path, const char *other)
{
    FILE *in = fopen(other, "rb"), *out = fopen(path, "wb");
    assert_non_null(in);
    assert_non_null(out);
    for (int c; (c = fgetc(in)) != EOF;)
        fputc(c, out);
    fclose(in);
    fclose(out);
}

static void random_bytes(const char *path, const char *other)
{
    (void)other;
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    uint64_t s = 99;
    for (int i = 0; i < 5000; ++i) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        fputc((int)(s >> 56), f);
    }
    fclose(f);
}

/* A new temporary folder that one context has filled. */
static void filled_folder(char *dir, size_t size)
{
    temp_dir(dir, size);
    unsigned loads = 0, stores = 0;
    fcl_context *ctx = cache_context(dir, 0);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
}

static void test_damaged_entries(void **state)
{
    (void)state;
    char dir[64];
    filled_folder(dir, sizeof dir);
    check_rebuilt(dir, truncate_half);
    check_rebuilt(dir, flip_last_byte);
    check_rebuilt(dir, copy_other_entry); /* a whole entry, of another key */
    check_rebuilt(dir, random_bytes);
    remove_tree(dir);
}

static void test_size_bound(void **state)
{
    (void)state;
    char dir[64];
    filled_folder(dir, sizeof dir);
    unsigned loads = 0, stores = 0;
    const folder all = scan(dir);
    assert_true(all.entries >= 2);

    /* room for the largest entry only: older ones go, the folder fits */
    char small_dir[64];
    temp_dir(small_dir, sizeof small_dir);
    fcl_context *ctx = cache_context(small_dir, all.largest);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    const folder bounded = scan(small_dir);
    assert_true(bounded.bytes <= all.largest);
    assert_true(bounded.entries >= 1 && bounded.entries < all.entries);
    remove_tree(dir);
    remove_tree(small_dir);
}

/* The probe's answer on disk: read back as written, and refused when its
 * file is damaged or names another device (the probe then runs again). */
static void test_probe_answer(void **state)
{
    (void)state;
    char dir[64];
    temp_dir(dir, sizeof dir);
    fcl_context *ctx = cache_context(dir, 0);
    /* a GPU's context has just probed and kept its answer here: start empty */
    DIR *d = opendir(dir);
    char path[700] = "";
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, "flashcl-probe-", 14) == 0) {
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            assert_int_equal(remove(path), 0);
        }
    closedir(d);
    uint64_t got = 0;
    assert_false(fcl_disk_cache_load_probe(ctx, &got));
    const uint64_t bytes = ctx->info.local_mem_reported + 4096;
    fcl_disk_cache_store_probe(ctx, bytes);
    assert_true(fcl_disk_cache_load_probe(ctx, &got));
    assert_int_equal(got, bytes);

    path[0] = '\0';
    d = opendir(dir);
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strncmp(e->d_name, "flashcl-probe-", 14) == 0)
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    closedir(d);
    assert_true(path[0] != '\0');
    flip_last_byte(path, NULL); /* the newline after the checksum */
    assert_false(fcl_disk_cache_load_probe(ctx, &got));
    fcl_disk_cache_store_probe(ctx, bytes);
    truncate_half(path, NULL);
    assert_false(fcl_disk_cache_load_probe(ctx, &got));
    /* below what the device reports: not believed */
    fcl_disk_cache_store_probe(ctx, ctx->info.local_mem_reported / 2);
    assert_false(fcl_disk_cache_load_probe(ctx, &got));
    /* another driver: another file */
    fcl_disk_cache_store_probe(ctx, bytes);
    snprintf(ctx->info.driver_version, sizeof ctx->info.driver_version, "another driver");
    assert_false(fcl_disk_cache_load_probe(ctx, &got));
    fcl_context_destroy(ctx);
    remove_tree(dir);
}

/* ---- several processes ---------------------------------------------------- */

enum { CHILDREN = 4 };

static int child_main(const char *dir)
{
    fcl_context_options o;
    fcl_context_options_init(&o);
    o.cache_dir = dir;
    fcl_context *ctx = NULL;
    if (fcl_context_create(&o, &ctx) != FCL_OK)
        return 2;
    fa_result r;
    const int ok = fa_check_forward(ctx, &small, &r) && fa_check_backward(ctx, &small, &r);
    fcl_context_destroy(ctx);
    return ok ? 0 : 1;
}

static void test_processes_share_a_folder(void **state)
{
    (void)state;
    char dir[64];
    temp_dir(dir, sizeof dir);
    pid_t pids[CHILDREN];
    for (int i = 0; i < CHILDREN; ++i) {
        char *argv[] = {(char *)self_path, "--child", dir, NULL};
        assert_int_equal(posix_spawn(&pids[i], self_path, NULL, NULL, argv, environ), 0);
    }
    for (int i = 0; i < CHILDREN; ++i) {
        int status = 0;
        assert_int_equal(waitpid(pids[i], &status, 0), pids[i]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    const folder f = scan(dir);
    assert_int_equal(f.temps, 0);
    unsigned loads = 0, stores = 0;
    fcl_context *ctx = cache_context(dir, 0);
    run_and_count(ctx, &loads, &stores);
    fcl_context_destroy(ctx);
    assert_int_equal(stores, 0); /* whole entries, whoever wrote them last */
    assert_int_equal(loads, (unsigned)f.entries);
    remove_tree(dir);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--child") == 0)
        return child_main(argv[2]);
    self_path = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_second_context_loads),
        cmocka_unit_test(test_folder_choice),
        cmocka_unit_test(test_damaged_entries),
        cmocka_unit_test(test_size_bound),
        cmocka_unit_test(test_probe_answer),
        cmocka_unit_test(test_processes_share_a_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
