/* mpi_ring_probe: a tiny MPI fixture for scripts/mpi-two-hosts.sh.
 *
 * Each rank says who it is (rank, MPI processor name, the network namespace
 * it runs in and its non-loopback IPv4 addresses), then
 *   1. swaps PROBE_BYTES (default 64 MiB) with its ring neighbour and checks
 *      the received pattern byte for byte,
 *   2. ranks 0 and 1 ping-pong 8 bytes (latency) and 16 MiB (bandwidth).
 * Every rank ends with one "probe-total rank=R sent=S recv=R" line giving
 * the exact payload bytes it sent and received, so a wrapper can compare
 * them with the interface counters.
 *
 * Exit status: 0 when every check passed, 1 otherwise.
 * Environment: PROBE_BYTES, PROBE_LAT_ITERS (default 1000),
 *              PROBE_BW_ITERS (default 10).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <ifaddrs.h>
#include <mpi.h>
#include <net/if.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static long env_long(const char *name, long def)
{
    const char *s = getenv(name);
    if (s == NULL || *s == '\0')
        return def;
    char *end = NULL;
    long v = strtol(s, &end, 10);
    return (end != s && *end == '\0' && v > 0) ? v : def;
}

/* What `ip netns identify` prints: the /run/netns entry whose inode is ours. */
static void netns_name(char *out, size_t n)
{
    struct stat self;
    snprintf(out, n, "(root or unnamed)");
    if (stat("/proc/self/ns/net", &self) != 0)
        return;
    DIR *d = opendir("/run/netns");
    if (d == NULL)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        struct stat st;
        snprintf(path, sizeof path, "/run/netns/%s", e->d_name);
        if (stat(path, &st) == 0 && st.st_dev == self.st_dev &&
            st.st_ino == self.st_ino) {
            snprintf(out, n, "%s", e->d_name);
            break;
        }
    }
    closedir(d);
}

static void ipv4_addrs(char *out, size_t n)
{
    struct ifaddrs *ifs = NULL, *i;
    size_t used = 0;
    out[0] = '\0';
    if (getifaddrs(&ifs) != 0)
        return;
    for (i = ifs; i != NULL; i = i->ifa_next) {
        if (i->ifa_addr == NULL || i->ifa_addr->sa_family != AF_INET ||
            (i->ifa_flags & IFF_LOOPBACK))
            continue;
        char a[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &((struct sockaddr_in *)i->ifa_addr)->sin_addr, a,
                  sizeof a);
        int k = snprintf(out + used, n - used, "%s%s:%s", used ? "," : "",
                         i->ifa_name, a);
        if (k < 0 || (size_t)k >= n - used)
            break;
        used += (size_t)k;
    }
    freeifaddrs(ifs);
    if (used == 0)
        snprintf(out, n, "(none)");
}

static unsigned char pattern(int from_rank, size_t i)
{
    return (unsigned char)((i * 131u + (size_t)from_rank * 17u) & 0xff);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size, ok = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    char host[MPI_MAX_PROCESSOR_NAME];
    int hl;
    char ns[256], addrs[512];
    MPI_Get_processor_name(host, &hl);
    netns_name(ns, sizeof ns);
    ipv4_addrs(addrs, sizeof addrs);
    printf("probe-id rank=%d size=%d host=%s netns=%s addrs=%s\n", rank, size,
           host, ns, addrs);
    fflush(stdout);

    size_t bytes = (size_t)env_long("PROBE_BYTES", 64L << 20);
    long lat_iters = env_long("PROBE_LAT_ITERS", 1000);
    long bw_iters = env_long("PROBE_BW_ITERS", 10);
    unsigned char *sbuf = malloc(bytes), *rbuf = malloc(bytes);
    if (sbuf == NULL || rbuf == NULL) {
        fprintf(stderr, "probe rank %d: cannot allocate 2 x %zu bytes\n", rank,
                bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < bytes; i++)
        sbuf[i] = pattern(rank, i);
    memset(rbuf, 0, bytes);

    uint64_t sent = 0, recvd = 0;
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;

    /* 1. The ring swap. MPI counts are int, so go in chunks of <= 1 GiB. */
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (size_t off = 0; off < bytes;) {
        int chunk = (int)((bytes - off) > (1u << 30) ? (1u << 30) : bytes - off);
        MPI_Sendrecv(sbuf + off, chunk, MPI_BYTE, next, 1, rbuf + off, chunk,
                     MPI_BYTE, prev, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        off += (size_t)chunk;
    }
    double t = MPI_Wtime() - t0;
    sent += bytes;
    recvd += bytes;
    size_t bad = 0;
    for (size_t i = 0; i < bytes; i++)
        bad += rbuf[i] != pattern(prev, i);
    if (bad)
        ok = 0;
    printf("probe-ring rank=%d to=%d from=%d sent=%zu recv=%zu seconds=%.6f "
           "MiB/s=%.1f mismatched=%zu\n",
           rank, next, prev, bytes, bytes, t, bytes / t / 1048576.0, bad);
    fflush(stdout);

    /* 2. Ping-pong between ranks 0 and 1 (others wait at the barrier). */
    size_t sizes[2] = {8, (size_t)16 << 20};
    long iters[2] = {lat_iters, bw_iters};
    for (int k = 0; k < 2; k++) {
        size_t m = sizes[k] <= bytes ? sizes[k] : bytes;
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank > 1 || size < 2)
            continue;
        int peer = 1 - rank;
        /* one untimed round trip to warm up the connection and buffers */
        for (long it = -1; it < iters[k]; it++) {
            if (it == 0)
                t0 = MPI_Wtime();
            if (rank == 0) {
                MPI_Send(sbuf, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
                MPI_Recv(rbuf, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(rbuf, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD,
                         MPI_STATUS_IGNORE);
                MPI_Send(sbuf, (int)m, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
            }
            sent += m;
            recvd += m;
        }
        t = MPI_Wtime() - t0;
        if (rank == 0) {
            double one_way = t / (2.0 * (double)iters[k]);
            printf("probe-pingpong bytes=%zu iters=%ld one_way_us=%.2f "
                   "MiB/s=%.1f\n",
                   m, iters[k], one_way * 1e6, m / one_way / 1048576.0);
            fflush(stdout);
        }
    }

    MPI_Barrier(MPI_COMM_WORLD);
    printf("probe-total rank=%d sent=%llu recv=%llu ok=%d\n", rank,
           (unsigned long long)sent, (unsigned long long)recvd, ok);
    fflush(stdout);
    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    free(sbuf);
    free(rbuf);
    MPI_Finalize();
    return all_ok ? 0 : 1;
}
