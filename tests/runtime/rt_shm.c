/* rt_shm.c - the shm self-test: layout, create/attach, mode 0600, header
 * validation (foreign, other version, dead creator), handle bounds, sweep. */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_test.h"

static int contains(const char *hay, const char *needle) { return strstr(hay, needle) != NULL; }

int rt_test_shm(void) {
    int before = rt_failures;

    /* layout: deterministic, aligned, refuses duplicates */
    fg_shm_region reg[] = {{"a", 10, 0}, {"b", 4096, 0}, {"c", 0, 0}, {"d", 5000, 0}};
    uint64_t data = 0;
    RT_CHECK(fg_shm_layout(reg, 4, &data) == FG_OK, "layout: %s", fg_err_msg());
    RT_CHECK(reg[0].offset == 4096 && reg[1].offset == 8192 && reg[2].offset == 12288 &&
             reg[3].offset == 12288 && data == 16384,
             "layout offsets %llu %llu %llu %llu, data %llu", (unsigned long long)reg[0].offset,
             (unsigned long long)reg[1].offset, (unsigned long long)reg[2].offset,
             (unsigned long long)reg[3].offset, (unsigned long long)data);
    fg_shm_handle h = fg_shm_layout_handle(reg, 4, 2, "d");
    RT_CHECK(h.segment == 2 && h.offset == 12288 && h.nbytes == 5000, "layout_handle");
    fg_shm_region dup[] = {{"x", 1, 0}, {"x", 1, 0}};
    RT_CHECK(fg_shm_layout(dup, 2, &data) == FG_EINPUT, "duplicate region names accepted");

    /* create + attach: same bytes through both mappings, mode 0600 */
    char run[FG_SHM_RUNID_LEN + 1];
    RT_MUST(fg_shm_run_id_new(run));
    fg_shm_seg *own = NULL, *att = NULL;
    RT_MUST(fg_shm_create(run, "t", 0, 10000, &own));
    RT_CHECK(fg_shm_size(own) == 4096 + 12288, "size %llu", (unsigned long long)fg_shm_size(own));
    char path[128];
    snprintf(path, sizeof path, "/dev/shm%s", fg_shm_name(own));
    struct stat sb;
    RT_CHECK(stat(path, &sb) == 0 && (sb.st_mode & 0777) == 0600, "%s mode %o", path,
             (unsigned)(sb.st_mode & 0777));
    RT_CHECK(fg_shm_attach(fg_shm_name(own), 0, &att) == FG_OK, "attach: %s", fg_err_msg());
    if (att) {
        memcpy((char *)fg_shm_base(own) + 4096, "hello", 6);
        RT_CHECK(!memcmp((char *)fg_shm_base(att) + 4096, "hello", 6), "bytes differ");
        fg_shm_destroy(&att);
    }
    RT_CHECK(fg_shm_attach(fg_shm_name(own), 5, &att) != FG_OK, "wrong index accepted");

    /* handle bounds */
    fg_shm_table *t = fg_shm_table_new();
    fg_shm_table_add(t, own);
    fg_shm_handle ok = {0, 4096, 12288}, below = {0, 0, 8}, past = {0, 4096, 12289},
                  wrap = {0, 8192, UINT64_MAX - 100}, noseg = {3, 4096, 8};
    RT_CHECK(fg_shm_resolve(t, ok) != NULL, "in-range handle refused");
    RT_CHECK(fg_shm_resolve(t, below) == NULL, "handle into the header accepted");
    RT_CHECK(fg_shm_resolve(t, past) == NULL, "handle past the end accepted");
    RT_CHECK(fg_shm_resolve(t, wrap) == NULL, "wrapping handle accepted");
    RT_CHECK(fg_shm_resolve(t, noseg) == NULL, "unknown segment accepted");

    /* other format version: refused, with the reason */
    uint32_t *ver = (uint32_t *)((char *)fg_shm_base(own) + 8);
    *ver = 99;
    RT_CHECK(fg_shm_attach(fg_shm_name(own), 0, &att) != FG_OK &&
             contains(fg_err_msg(), "format version 99"), "other version: %s", fg_err_msg());
    *ver = FG_SHM_FORMAT_VERSION;
    char name[FG_SHM_NAME_MAX];
    snprintf(name, sizeof name, "%s", fg_shm_name(own));
    fg_shm_table_destroy(&t);  /* unlinks own */
    RT_CHECK(stat(path, &sb) != 0, "%s still there after destroy", path);

    /* a foreign object under our prefix */
    snprintf(name, sizeof name, "/flexgen-%s-foreign", run);
    int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
    RT_CHECK(fd >= 0, "shm_open foreign");
    if (fd >= 0) {
        RT_CHECK(ftruncate(fd, 8192) == 0, "ftruncate");
        RT_CHECK(write(fd, "not a flexgen segment", 21) == 21, "write");
        close(fd);
        RT_CHECK(fg_shm_attach(name, UINT32_MAX, &att) != FG_OK &&
                 contains(fg_err_msg(), "bad magic"), "foreign: %s", fg_err_msg());
        shm_unlink(name);
    }

    /* a segment whose creator died: refused, then swept */
    pid_t p = fork();
    if (p == 0) {
        fg_shm_seg *s = NULL;
        _exit(fg_shm_create(run, "orphan", 1, 4096, &s) == FG_OK ? 0 : 1);  /* no unlink */
    }
    int ws = 0;
    waitpid(p, &ws, 0);
    RT_CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child could not create its segment");
    snprintf(name, sizeof name, "/flexgen-%s-orphan", run);
    RT_CHECK(fg_shm_attach(name, 1, &att) != FG_OK && contains(fg_err_msg(), "dead run"),
             "stale: %s", fg_err_msg());
    RT_CHECK(rt_count_shm(run) == 1, "orphan not there before the sweep");
    int swept = fg_shm_sweep();
    RT_CHECK(swept >= 1 && rt_count_shm(run) == 0, "sweep removed %d, %d left", swept,
             rt_count_shm(run));

    /* bad names are refused before anything is created */
    RT_CHECK(fg_shm_create(run, "a/b", 0, 1, &own) == FG_EINPUT, "slash in a name accepted");
    RT_CHECK(fg_shm_create(run, "", 0, 1, &own) == FG_EINPUT, "empty name accepted");

    fprintf(stderr, "shm self-test: %s\n", rt_failures == before ? "ok" : "FAIL");
    return rt_failures != before;
}
