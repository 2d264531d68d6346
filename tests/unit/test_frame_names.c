// SPDX-License-Identifier: MIT
/*
 * Frame names of report and stack (report/frame_names.h) for user frames:
 *  - tagged by object: the guest's own names ("usym") within each
 *    function's size, else FILE+0xADDR, never a guessed name; exact pcs
 *    at pc, return addresses at pc - 1;
 *  - debug info by build-id: a --binary with that build-id, the symbol
 *    directory, and a real debuginfod server (Debian's debuginfod, started
 *    here on a free port over a directory with the workload, asked on
 *    127.0.0.1), giving file:line;
 *  - a frame outside every known object is never named after a binary's
 *    last symbol (idlevm stack --binary once printed _end+0x7fda3f457eb4).
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include "kernel/ksyms.h"
#include "report/frame_names.h"
#include "report/mappings.h"
#include "unwind/uunwind_dwarf.h"
#include "unwind/uunwind_exe.h"
#include "tmp_files.h"

#define LOCKSTORM "build/guest/lockstorm-nofp"

static void log_quiet(void *ctx, const char *msg)
{
	(void)ctx;
	cr_log_info("names: %s", msg);
}

/* The build-id of path, in hex. */
static void build_id_of(const char *path, char *hex)
{
	struct ivm_ubinary *b;
	const uint8_t *id;
	size_t len;

	cr_assert_null(ivm_ubinary_open(path, &b));
	cr_assert(ivm_ubinary_build_id(b, &id, &len));
	ivm_build_id_hex(id, len, hex);
	ivm_ubinary_destroy(b);
}

static uint64_t symbol_addr(const char *path, const char *name)
{
	struct ivm_ksyms *syms;
	const struct ivm_ksym *s;
	uint64_t a;

	cr_assert_null(ivm_ksyms_load_elf(path, &syms));
	s = ivm_ksyms_find(syms, name);
	cr_assert_not_null(s, "%s has no %s", path, name);
	a = s->addr;
	ivm_ksyms_destroy(syms);
	return a;
}

/* The outermost name frame_names gives pc (NULL: none) and its count. */
static const char *name_of(struct ivm_frame_names *fn, uint64_t pc,
			   bool exact, struct ivm_report_frame *f,
			   unsigned int *got)
{
	struct ivm_symbolizer sym = ivm_frame_names_symbolizer(fn);

	*got = sym.frames(sym.ctx, IVM_NODE_USER, pc, exact, f,
			  IVM_REPORT_MAX_INLINE);
	return *got ? f[*got - 1].function : NULL;
}

Test(frame_names, guest_names_within_sizes_else_file_offset)
{
	struct ivm_meta_lines meta = { 0 };
	struct ivm_frame_names_config cfg = { .log = log_quiet };
	struct ivm_frame_names *fn = ivm_frame_names_create();
	struct ivm_report_frame f[IVM_REPORT_MAX_INLINE];
	unsigned int got;

	ivm_meta_lines_add(&meta, "uobject",
			   "1 0011223344556677 dyn /lib/x86_64-linux-gnu/libc.so.6");
	ivm_meta_lines_add(&meta, "usym", "1 0x1000 0x10 write");
	ivm_meta_lines_add(&meta, "usym", "1 0x2000 0x8 read");
	ivm_meta_lines_add(&meta, "uobject", "2 8899aabbccddeeff exec -");
	ivm_meta_lines_add(&meta, "usym", "9 0x1000 0x10 of_no_object");
	ivm_frame_names_load(fn, &cfg, &meta);

	cr_assert_str_eq(name_of(fn, IVM_UPC(1, 0x1005), false, f, &got),
			 "write");
	cr_assert(f[0].has_offset);
	cr_assert_eq(f[0].offset, 5);
	/* A return address just past write: its call is still in write. */
	cr_assert_str_eq(name_of(fn, IVM_UPC(1, 0x1010), false, f, &got),
			 "write");
	/* The same address as an interrupted pc is past write's 16 bytes. */
	cr_assert_str_eq(name_of(fn, IVM_UPC(1, 0x1010), true, f, &got),
			 "libc.so.6+0x1010");
	cr_assert_str_eq(name_of(fn, IVM_UPC(1, 0x1800), false, f, &got),
			 "libc.so.6+0x1800");
	cr_assert_str_eq(name_of(fn, IVM_UPC(1, 0x2001), false, f, &got),
			 "read");
	/* No path: the build-id stands for the file. */
	cr_assert_str_eq(name_of(fn, IVM_UPC(2, 0x1005), false, f, &got),
			 "[8899aabbccdd]+0x1005");
	/* An object the metadata never described, or none at all. */
	cr_assert_null(name_of(fn, IVM_UPC(3, 0x1005), false, f, &got));
	cr_assert_null(name_of(fn, 0x7fda3f457eb4ull, false, f, &got));
	ivm_frame_names_destroy(fn);
	ivm_meta_lines_free(&meta);
}

/*
 * A --binary with the object's build-id gives DWARF names and file:line;
 * the same binary never names an address outside its text (the
 * `_end+0x7fda3f457eb4` of idlevm stack --binary).
 */
Test(frame_names, binary_by_build_id_and_never_outside_it)
{
	struct ivm_meta_lines meta = { 0 };
	const char *bins[] = { LOCKSTORM };
	struct ivm_frame_names_config cfg = { .binaries = bins,
					      .nr_binaries = 1,
					      .log = log_quiet };
	struct ivm_frame_names *fn = ivm_frame_names_create();
	struct ivm_report_frame f[IVM_REPORT_MAX_INLINE];
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1], line[256];
	uint64_t worker = symbol_addr(LOCKSTORM, "worker_main");
	unsigned int got;

	build_id_of(LOCKSTORM, hex);
	snprintf(line, sizeof(line), "1 %s exec /bin/lockstorm", hex);
	ivm_meta_lines_add(&meta, "uobject", line);
	ivm_frame_names_load(fn, &cfg, &meta);
	cr_assert_str_eq(name_of(fn, IVM_UPC(1, worker + 1), true, f, &got),
			 "worker_main");
	cr_assert_not_null(f[got - 1].file);
	cr_assert(strstr(f[got - 1].file, "lockstorm.c"), "%s",
		  f[got - 1].file);
	cr_assert_gt(f[got - 1].line, 0);
	/* Untagged, far above the executable: not its _end. */
	cr_assert_null(name_of(fn, 0x7fda3f857eb4ull, false, f, &got));
	ivm_frame_names_destroy(fn);
	ivm_meta_lines_free(&meta);
}

/* ---- a real debuginfod ----------------------------------------------------- */

static pid_t server = -1;
static char server_dir[] = "/tmp/ivm-debuginfod-XXXXXX";

static void stop_server(void)
{
	char cmd[256];

	if (server > 0) {
		kill(server, SIGTERM);
		waitpid(server, NULL, 0);
		server = -1;
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", server_dir);
	if (IVM_TMP_MADE(server_dir))
		cr_assert_eq(system(cmd), 0);
}

/* A free TCP port (the kernel's pick, released for the server). */
static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0), port;

	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(s);
	return port;
}

TestSuite(frame_names_debuginfod, .fini = stop_server);

Test(frame_names_debuginfod, file_line_from_a_real_server, .timeout = 180)
{
	struct ivm_meta_lines meta = { 0 };
	struct ivm_frame_names_config cfg = { .debuginfod = true,
					      .log = log_quiet };
	struct ivm_report_frame f[IVM_REPORT_MAX_INLINE];
	char hex[2 * IVM_UBINARY_MAX_BUILD_ID + 1], line[512], url[64];
	char files[600], cache[600], db[600], cmd[3200];
	uint64_t worker = symbol_addr(LOCKSTORM, "worker_main");
	unsigned int got = 0;
	int port, tries;

	if (access("/usr/bin/debuginfod", X_OK))
		cr_skip_test("no debuginfod (scripts/install-deps installs it)");
	cr_assert_not_null(mkdtemp(server_dir));
	snprintf(files, sizeof(files), "%s/files", server_dir);
	snprintf(cache, sizeof(cache), "%s/cache", server_dir);
	snprintf(db, sizeof(db), "%s/db.sqlite", server_dir);
	/*
	 * The client remembers a miss for cache_miss_s (600 s by default):
	 * a question asked before the server has scanned must not stick.
	 */
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p %.600s %.600s && cp %s %.600s/ && echo 0 > %.600s/cache_miss_s",
		 files, cache, LOCKSTORM, files, cache);
	cr_assert_eq(system(cmd), 0);
	port = free_port();
	server = fork();
	cr_assert_geq(server, 0);
	if (!server) {
		char p[16];
		int null = open("/dev/null", O_WRONLY);

		snprintf(p, sizeof(p), "%d", port);
		dup2(null, 1);
		dup2(null, 2);
		execl("/usr/bin/debuginfod", "debuginfod", "-p", p, "-d", db,
		      "-F", "-t", "1", "-g", "0", files, (char *)NULL);
		_exit(127);
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", port);
	setenv("DEBUGINFOD_URLS", url, 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	setenv("DEBUGINFOD_TIMEOUT", "10", 1);
	build_id_of(LOCKSTORM, hex);
	snprintf(line, sizeof(line), "1 %s exec /bin/lockstorm", hex);
	ivm_meta_lines_add(&meta, "uobject", line);
	/* The server scans its directory in the background: ask until. */
	for (tries = 0; tries < 120; tries++) {
		struct ivm_frame_names *fn = ivm_frame_names_create();
		const char *name;

		ivm_frame_names_load(fn, &cfg, &meta);
		name = name_of(fn, IVM_UPC(1, worker + 1), true, f, &got);
		if (name && !strcmp(name, "worker_main")) {
			cr_assert_not_null(f[got - 1].file);
			cr_assert(strstr(f[got - 1].file, "lockstorm.c"));
			cr_assert_gt(f[got - 1].line, 0);
			ivm_frame_names_destroy(fn);
			break;
		}
		/* Before the scan: its file and address, never a guess. */
		cr_assert(!name || strstr(name, "lockstorm+0x"), "%s", name);
		ivm_frame_names_destroy(fn);
		usleep(500000);
	}
	cr_assert_lt(tries, 120, "debuginfod never served %s", hex);
	cr_log_info("named through debuginfod after %d tries", tries + 1);
	unsetenv("DEBUGINFOD_URLS");
	ivm_meta_lines_free(&meta);
}

/*
 * pprof's mappings of user objects: each where a process had its code
 * ("umap": run-time range and file offset, less the bias), so a tagged
 * frame falls in the mapping of its file at its link-time address.
 */
Test(frame_names, user_object_mappings_from_umap)
{
	struct ivm_meta_lines meta = { 0 };
	struct ivm_frame_names_config cfg = { .log = log_quiet };
	struct ivm_frame_names *fn = ivm_frame_names_create();
	struct ivm_mappings *maps = ivm_mappings_create();
	const struct ivm_mapping *m;

	ivm_meta_lines_add(&meta, "uobject",
			   "1 0011223344556677 dyn /usr/lib/x86_64-linux-gnu/libc.so.6");
	ivm_meta_lines_add(&meta, "umap",
			   "180 1 0x7fd54589b000 0x7fd5459f1000 0x26000 0x7fd545875000");
	ivm_meta_lines_add(&meta, "uobject", "2 8899aabbccddeeff exec -");
	ivm_frame_names_load(fn, &cfg, &meta);
	ivm_frame_names_mappings(fn, maps);
	m = ivm_mappings_find(maps, IVM_NODE_USER, IVM_UPC(1, 0x891f5));
	cr_assert_not_null(m);
	cr_assert_eq(m->start, 0x26000);
	cr_assert_eq(m->limit, 0x17c000);
	cr_assert_eq(m->offset, 0x26000);
	cr_assert_str_eq(m->file, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	cr_assert_str_eq(m->build_id, "0011223344556677");
	cr_assert_null(ivm_mappings_find(maps, IVM_NODE_USER,
					 IVM_UPC(1, 0x17c000)));
	/* No umap, no host copy: all of its addresses, file unknown. */
	m = ivm_mappings_find(maps, IVM_NODE_USER, IVM_UPC(2, 0x1234));
	cr_assert_not_null(m);
	cr_assert_str_eq(m->build_id, "8899aabbccddeeff");
	ivm_mappings_destroy(maps);
	ivm_frame_names_destroy(fn);
	ivm_meta_lines_free(&meta);
}
