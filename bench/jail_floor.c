/*
 * The kernel's floor for one jailed call shaped like glovebox's, for
 * bench/jail_floor.sh: what a call costs when nothing but the system calls
 * that build the jail run (no policy, no audit, no HTTP, no allocation).
 * Per call, in a loop: clone(CLONE_VM|CLONE_VFORK|CLONE_NEWNS|CLONE_NEWPID|
 * CLONE_NEWIPC); the child makes its mounts private, mounts a tmpfs root,
 * binds BINDS host directories into it read-only (mkdir + bind +
 * mount_setattr each, as glovebox's tree does), links bin/lib/lib64 into
 * the bound /usr, mounts a fresh /proc, pivot_root's and detaches the old
 * root, sets no_new_privs, installs a Landlock ruleset with one rule per
 * bind, a seccomp filter of FILTER instructions (see build_filter), and
 * execs /bin/true; the
 * parent waits. WORKERS processes run the loop side by side for SECONDS.
 *
 *     cc -O2 -o jail_floor jail_floor.c
 *     ./jail_floor MODE BINDS FILTER WORKERS SECONDS
 *
 * MODE `bare` is fork+exec of /bin/true and nothing else; `jail` is the
 * above; `reuse` builds the tree and the ruleset once per worker and gives
 * each call only its own PID and mount namespaces (a copy of the tree), a
 * fresh /proc, a tmpfs home, Landlock, seccomp and exec: what a jail
 * kept per policy would cost. Prints one JSON object: calls, calls/s, mean microseconds per
 * call per worker. Run as root (the supervisor glovebox compares with).
 *
 *     ./jail_floor once BINDS FILTER
 *
 * makes one jailed call and exits with its status: a one-shot process
 * building the same jail, for bench/jail.sh to time beside
 * `glovebox sandbox -- /bin/true` (the floor of a one-shot jail).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/mount.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BINDS 64
#define MAX_FILTER 4096

static const char *HOSTDIRS[] = {"/usr", "/etc", "/var", "/opt", "/srv", "/home", "/root", "/tmp"};
static int binds, filter_len;
static struct sock_filter prog[MAX_FILTER];
static char root[64];
static char *const true_argv[] = {"true", NULL};
static char *const true_env[] = {"PATH=/usr/bin", NULL};

static void die(const char *what) {
    /* In the child: report through the exit status only. */
    (void)what;
    _exit(100 + (errno & 63));
}

static void rdonly(const char *path) {
    struct mount_attr a = {.attr_set = MOUNT_ATTR_RDONLY};
    if (syscall(SYS_mount_setattr, AT_FDCWD, path, AT_RECURSIVE, &a, sizeof a))
        die("mount_setattr");
}

/* The jail's root: a tmpfs with the binds, /usr and its links, /proc,
 * then pivot_root and the old root detached. */
static void build_tree(void) {
    char at[96];
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL))
        die("private");
    if (mount("tmpfs", root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"))
        die("tmpfs");
    for (int i = 0; i < binds; i++) {
        snprintf(at, sizeof at, "%s/m%d", root, i);
        if (mkdir(at, 0755))
            die("mkdir");
        if (mount(HOSTDIRS[i % 8], at, NULL, MS_BIND | MS_REC, NULL))
            die("bind");
        rdonly(at);
    }
    snprintf(at, sizeof at, "%s/usr", root);
    if (mkdir(at, 0755) || mount("/usr", at, NULL, MS_BIND | MS_REC, NULL))
        die("usr");
    rdonly(at);
    static const char *links[][2] = {{"usr/bin", "bin"}, {"usr/lib", "lib"}, {"usr/lib64", "lib64"}};
    for (int i = 0; i < 3; i++) {
        snprintf(at, sizeof at, "%s/%s", root, links[i][1]);
        if (symlink(links[i][0], at))
            die("symlink");
    }
    snprintf(at, sizeof at, "%s/home", root);
    if (mkdir(at, 0755))
        die("home");
    snprintf(at, sizeof at, "%s/proc", root);
    if (mkdir(at, 0555) || mount("proc", at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
        die("proc");
    snprintf(at, sizeof at, "%s/.old", root);
    if (mkdir(at, 0700) || chdir(root) || syscall(SYS_pivot_root, ".", ".old"))
        die("pivot");
    if (umount2("/.old", MNT_DETACH) || rmdir("/.old") || chdir("/"))
        die("detach");
}

/* A Landlock ruleset with one rule per bind and /usr (paths of the jail). */
static int make_ruleset(void) {
    char at[32];
    struct landlock_ruleset_attr ra = {.handled_access_fs = (1ULL << 16) - 1};
    int rs = syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
    if (rs < 0)
        die("ruleset");
    for (int i = 0; i <= binds; i++) {
        if (i < binds)
            snprintf(at, sizeof at, "/m%d", i);
        else
            snprintf(at, sizeof at, "/usr");
        int fd = open(at, O_PATH | O_CLOEXEC);
        struct landlock_path_beneath_attr pb = {
            .allowed_access = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR,
            .parent_fd = fd,
        };
        if (fd < 0 || syscall(SYS_landlock_add_rule, rs, LANDLOCK_RULE_PATH_BENEATH, &pb, 0))
            die("rule");
        close(fd);
    }
    return rs;
}

/* no_new_privs, Landlock, seccomp, exec. */
static void confine_and_exec(int rs) {
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0))
        die("nnp");
    if (syscall(SYS_landlock_restrict_self, rs, 0))
        die("restrict");
    struct sock_fprog fp = {.len = (unsigned short)filter_len, .filter = prog};
    if (filter_len > 0 && syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp))
        die("seccomp");
    execve("/usr/bin/true", true_argv, true_env);
    die("exec");
}

/* A fresh jail per call. */
static int child(void *arg) {
    (void)arg;
    if (setsid() < 0)
        die("setsid");
    build_tree();
    int rs = make_ruleset();
    fcntl(rs, F_SETFD, FD_CLOEXEC);
    confine_and_exec(rs);
    return 0;
}

/* A call in a jail built once (mode `reuse`): the worker built the tree
 * and the ruleset; the call gets its own PID and mount namespaces (a copy
 * of the tree), a fresh /proc and a private tmpfs home. */
static int reuse_rs = -1;
static int reused_child(void *arg) {
    (void)arg;
    if (setsid() < 0)
        die("setsid");
    if (mount("tmpfs", "/home", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0700,size=64m"))
        die("home");
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL))
        die("proc");
    confine_and_exec(reuse_rs);
    return 0;
}

/* A filter of `n` instructions shaped like glovebox's: load the system
 * call number, one comparison that sends the numbers with rules to the
 * rest (never taken here), allow; then n-4 comparisons against numbers no
 * call uses, and allow. The kernel checks, converts and JITs every
 * instruction at install, but its allow-cache walk (once per system call
 * number) stops at the first allow, as glovebox's binary search does. */
static void build_filter(int n) {
    if (n < 4) {
        filter_len = 0;
        return;
    }
    prog[0] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
    prog[1] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 99999, 1, 0);
    prog[2] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    for (int i = 3; i < n - 1; i++) {
        unsigned char to_end = (unsigned char)((n - 2 - i) > 255 ? 255 : (n - 2 - i));
        prog[i] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 100000 + i, to_end, 0);
    }
    prog[n - 1] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
    filter_len = n;
}

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static long loop(int jail, int reuse, double seconds) {
    size_t size = 256 * 1024;
    char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return -1;
    long calls = 0;
    double end = now() + seconds;
    while (now() < end) {
        int status;
        pid_t pid;
        if (reuse) {
            pid = clone(reused_child, stack + size, CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | SIGCHLD, NULL);
        } else if (jail) {
            pid = clone(child, stack + size, CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, NULL);
        } else {
            pid = vfork();
            if (pid == 0) {
                execve("/usr/bin/true", true_argv, true_env);
                _exit(127);
            }
        }
        if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "jail_floor: call failed (status %d)\n", pid < 0 ? -errno : status);
            return -1;
        }
        calls++;
    }
    return calls;
}

/* Mode `once`: one jailed call from this process (its stage directory is
 * left in place for the next run; the tmpfs is mounted on it only inside
 * the call's own mount namespace). */
static int once(void) {
    snprintf(root, sizeof root, "/tmp/jail-floor-once");
    if (mkdir(root, 0755) && errno != EEXIST) {
        perror("jail_floor: mkdir");
        return 1;
    }
    size_t size = 256 * 1024;
    char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (stack == MAP_FAILED)
        return 1;
    int status;
    pid_t pid = clone(child, stack + size, CLONE_VM | CLONE_VFORK | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | SIGCHLD, NULL);
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) {
        fprintf(stderr, "jail_floor: call failed (status %d)\n", pid < 0 ? -errno : status);
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && strcmp(argv[1], "once") == 0) {
        binds = atoi(argv[2]);
        if (binds < 0 || binds > MAX_BINDS || atoi(argv[3]) > MAX_FILTER) {
            fprintf(stderr, "jail_floor: BINDS at most %d, FILTER at most %d\n", MAX_BINDS, MAX_FILTER);
            return 2;
        }
        build_filter(atoi(argv[3]));
        return once();
    }
    if (argc != 6) {
        fprintf(stderr, "usage: jail_floor bare|jail|reuse BINDS FILTER WORKERS SECONDS | jail_floor once BINDS FILTER\n");
        return 2;
    }
    int reuse = strcmp(argv[1], "reuse") == 0;
    int jail = reuse || strcmp(argv[1], "jail") == 0;
    binds = atoi(argv[2]);
    int workers = atoi(argv[4]);
    double seconds = atof(argv[5]);
    if (binds < 0 || binds > MAX_BINDS || atoi(argv[3]) > MAX_FILTER || workers < 1) {
        fprintf(stderr, "jail_floor: BINDS at most %d, FILTER at most %d, WORKERS at least 1\n", MAX_BINDS, MAX_FILTER);
        return 2;
    }
    build_filter(atoi(argv[3]));
    snprintf(root, sizeof root, "/tmp/jail-floor-%d", getpid());
    if (jail && mkdir(root, 0755) && errno != EEXIST) {
        perror("jail_floor: mkdir");
        return 1;
    }
    int fds[MAX_BINDS][2];
    double start = now();
    for (int w = 0; w < workers; w++) {
        if (pipe(fds[w]))
            return 1;
        if (fork() == 0) {
            if (reuse) {
                /* The worker becomes the jail built once: its own mount
                 * and IPC namespaces, the tree, the ruleset. */
                if (unshare(CLONE_NEWNS | CLONE_NEWIPC))
                    _exit(1);
                build_tree();
                reuse_rs = make_ruleset();
            }
            long n = loop(jail && !reuse, reuse, seconds);
            if (write(fds[w][1], &n, sizeof n) != sizeof n)
                _exit(1);
            _exit(n < 0);
        }
        close(fds[w][1]);
    }
    long total = 0;
    int failed = 0;
    for (int w = 0; w < workers; w++) {
        long n = -1;
        if (read(fds[w][0], &n, sizeof n) != sizeof n || n < 0)
            failed = 1;
        else
            total += n;
        wait(NULL);
    }
    double took = now() - start;
    if (jail)
        rmdir(root);
    if (failed)
        return 1;
    printf("{\"mode\": \"%s\", \"binds\": %d, \"filter\": %d, \"workers\": %d, \"calls\": %ld, "
           "\"calls_per_s\": %.1f, \"us_per_call_per_worker\": %.1f}\n",
           argv[1], jail ? binds : 0, jail ? filter_len : 0, workers, total, total / took,
           total ? took * 1e6 * workers / total : 0.0);
    return 0;
}
