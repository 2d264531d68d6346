// SPDX-License-Identifier: MIT
/*
 * Labels read from a program's own variables (profile/labels.h,
 * unwind/uelf.h), against real glibc 2.36 builds run here: the
 * labelset workload built static, static-pie and dynamic
 * (build/guest/labelset{,-pie,-dyn}; this host's glibc is Debian 12's, as
 * the guests').  It prints what each worker holds and where; the test
 * stops a worker with PTRACE_INTERRUPT, takes its fs base from its
 * registers, finds the variables from the binary's file (symbols, PT_TLS)
 * and, for pthread keys, glibc's layout from its libc (libthread_db
 * descriptors) or the built-in one, and reads the values through
 * process_vm_readv: they must be the ones printed.  Nothing depends on
 * timing: the values are set before the program says so and never change.
 *
 * Also: --label parsing, the TLS arithmetic on hand-made cases, the
 * built-in layout against Debian's libc6-dbg debug info (libdw) and the
 * host libc's descriptors, and the ELF reader on hostile headers.
 */
#include <criterion/criterion.h>
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdw.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/bytes.h"
#include "profile/labels.h"
#include "unwind/uelf.h"
#include "live_workload.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"
#define LIBC_DEBUG_DIR "/usr/lib/debug/.build-id"

/* ---- --label ---------------------------------------------------------- */

Test(labels, spec_parse)
{
	struct ivm_label_spec s;
	struct ivm_error *err;
	char buf[256];
	static const char *const bad[] = {
		"class", "=tls:x", "class=tls", "class=tls:", "class=heap:x",
		"class=tls:x:float", "class=tls:a:b:int", "cl ass=tls:x",
		"pid=var:x", "title=var:x",
		"a_key_that_is_far_too_long_for_us=var:x",
	};
	size_t i;

	cr_assert_null(ivm_label_spec_parse("class=tls:ls_request_class", &s));
	cr_assert_str_eq(s.key, "class");
	cr_assert_eq(s.source, IVM_LABEL_TLS);
	cr_assert_str_eq(s.symbol, "ls_request_class");
	cr_assert_eq(s.type, IVM_LABEL_INT);
	cr_assert_null(ivm_label_spec_parse("tenant.id=key:tk:str", &s));
	cr_assert_eq(s.source, IVM_LABEL_KEY);
	cr_assert_eq(s.type, IVM_LABEL_STR);
	cr_assert_str_eq(ivm_label_spec_format(&s, buf, sizeof(buf)),
			 "tenant.id=key:tk:str");
	cr_assert_null(ivm_label_spec_parse("n=var:counter:u64", &s));
	cr_assert_eq(s.type, IVM_LABEL_U64);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err = ivm_label_spec_parse(bad[i], &s);
		cr_assert_not_null(err, "%s accepted", bad[i]);
		cr_assert_eq(err->code, IVM_ERROR_INVALID);
		ivm_error_destroy(err);
	}
}

/* ---- TLS arithmetic --------------------------------------------------- */

Test(labels, tls_arithmetic)
{
	struct ivm_error *err;
	uint64_t a;

	/* The static lockstorm: memsz 0xd8, align 64: the block is 0x100. */
	cr_assert_null(ivm_tls_static_address(0x2824c400, 0x4a06c0, 0xd8, 0x40,
					      8, &a));
	cr_assert_eq(a, 0x2824c308);
	/* Alignment 0 or 1: no rounding. */
	cr_assert_null(ivm_tls_static_address(0x1000, 0, 0x11, 0, 0, &a));
	cr_assert_eq(a, 0x1000 - 0x11);
	/*
	 * A template whose p_vaddr is 8 past a 16-byte boundary: glibc puts
	 * its first byte 8 past one too (firstbyte 8):
	 * off = roundup(0x20 - 8, 16) + 8 = 0x28.
	 */
	cr_assert_null(ivm_tls_static_address(0x10000, 0x2008, 0x20, 16, 4,
					      &a));
	cr_assert_eq(a, 0x10000 - 0x28 + 4);
	cr_assert_eq((a - 4 - 0x2008) & 15, 0, "aligned as the template");
	/* Outside the block, a bad alignment, a thread pointer too low. */
	err = ivm_tls_static_address(0x10000, 0, 0x20, 16, 0x20, &a);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_tls_static_address(0x10000, 0, 0x20, 24, 0, &a);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_tls_static_address(0x10, 0, 0x20, 16, 0, &a);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	err = ivm_tls_static_address(UINT64_MAX, 0, UINT64_MAX - 2, 1ull << 63,
				     0, &a);
	cr_assert_not_null(err, "sizes that wrap");
	ivm_error_destroy(err);
}

/* ---- the workload --------------------------------------------------------- */

static const struct ivm_kmem_reader umem = { live_workload_read, NULL };

TestSuite(labels_real, .fini = live_workload_stop);

struct worker_line {
	int n, tid;
	char tenant[32];
	unsigned long far;
	uint64_t tls_addr, code_addr;
};

/* Run bin with 2 workers until "ready"; fill w[0..1]. */
static void start_workload(const char *bin, struct worker_line *w)
{
	char *const argv[] = { (char *)bin, "--threads", "2", "--sleep-ms",
			       "50", "--seconds", "600", NULL };
	char buf[4096] = "";
	size_t len = 0;
	int found = 0;

	if (access(bin, X_OK))
		cr_assert_fail("%s missing: run make guest", bin);
	cr_assert_eq(live_workload_start(argv), 0, "%s: %s", bin,
		     strerror(errno));
	while (!strstr(buf, "labelset: ready")) {
		struct pollfd pfd = { workload_out, POLLIN, 0 };
		ssize_t n;

		cr_assert_eq(poll(&pfd, 1, -1), 1, "%s: not ready", bin);
		n = read(workload_out, buf + len, sizeof(buf) - 1 - len);
		cr_assert_gt(n, 0, "%s exited early", bin);
		len += (size_t)n;
		buf[len] = 0;
	}
	for (char *l = buf; (l = strstr(l, "labelset: worker=")); l++) {
		struct worker_line x;

		cr_assert_eq(sscanf(l, "labelset: worker=%d tid=%d name=%*s "
				    "tenant=%31s far=%lu reused=(null) "
				    "tls_addr=%lx code_addr=%lx", &x.n, &x.tid,
				    x.tenant, &x.far, &x.tls_addr,
				    &x.code_addr), 6, "%s", l);
		cr_assert(x.n == 1 || x.n == 2);
		w[x.n - 1] = x;
		found++;
	}
	cr_assert_eq(found, 2, "%s", buf);
}

/* The fs base of thread tid, from its registers (it is stopped meanwhile). */
static uint64_t fs_base_of(pid_t tid)
{
	struct user_regs_struct regs;
	int status;

	cr_assert_eq(ptrace(PTRACE_SEIZE, tid, NULL, NULL), 0, "seize %d: %s",
		     tid, strerror(errno));
	cr_assert_eq(ptrace(PTRACE_INTERRUPT, tid, NULL, NULL), 0);
	cr_assert_eq(waitpid(tid, &status, __WALL), tid);
	cr_assert_eq(ptrace(PTRACE_GETREGS, tid, NULL, &regs), 0);
	cr_assert_eq(ptrace(PTRACE_DETACH, tid, NULL, NULL), 0);
	return regs.fs_base;
}

/* The load bias of the workload's executable (a PIE's), from its maps. */
static uint64_t bias_of(const char *bin, const struct ivm_uelf *h)
{
	char path[64], line[512], *real = realpath(bin, NULL);
	unsigned long long start, off;
	uint64_t bias = UINT64_MAX;
	size_t i;
	FILE *f;

	if (h->type == ET_EXEC) {
		free(real);
		return 0;
	}
	snprintf(path, sizeof(path), "/proc/%d/maps", workload);
	f = fopen(path, "r");
	cr_assert(f && real);
	while (fgets(line, sizeof(line), f)) {
		if (!strstr(line, real) ||
		    sscanf(line, "%llx-%*x %*s %llx", &start, &off) != 2 || off)
			continue;
		for (i = 0; i < h->nr_loads; i++)
			if (!(h->loads[i].offset & ~4095ull))
				bias = start - (h->loads[i].vaddr & ~4095ull);
		break;
	}
	fclose(f);
	free(real);
	cr_assert_neq(bias, UINT64_MAX, "no mapping of %s", bin);
	return bias;
}

static struct ivm_uelf_host_file host;
static struct ivm_kmem_reader file;

/* The symbols names (n of them) of the ELF file at path. */
static void lookup(const char *path, struct ivm_uelf *h,
		   const char *const *names, size_t n,
		   struct ivm_uelf_symbol *sym, bool *found)
{
	bool incomplete;

	cr_assert_null(ivm_uelf_host_file_open(path, &host, &file));
	cr_assert_null(ivm_uelf_parse(&file, h));
	cr_assert_null(ivm_uelf_find_symbols(&file, h, 0, names, n, sym, found,
					     &incomplete));
	cr_assert(!incomplete);
}

static const char *const names[] = {
	"labelset_worker", "labelset_worker_name", "labelset_code",
	"labelset_name", "labelset_big", "labelset_key_tenant",
	"labelset_key_far", "labelset_key_reused", "__pthread_keys",
	"no_such_symbol_anywhere",
};
enum { WORKER, WORKER_NAME, CODE, NAME, BIG, K_TENANT, K_FAR, K_REUSED,
       KEYS, NONE, NR_NAMES };

/*
 * The libthread_db descriptors of the host's libc (what a guest's libc of
 * the same build holds), and its __pthread_keys' link-time address.
 */
static void libc_db(struct ivm_pthread_db *db, uint64_t *keys)
{
	static const char *const db_names[] = {
		"__pthread_keys", "_thread_db_pthread_specific",
		"_thread_db_pthread_key_data_level2_data",
		"_thread_db_pthread_key_data_seq",
		"_thread_db_pthread_key_data_data",
		"_thread_db___pthread_keys",
		"_thread_db_pthread_key_struct_seq",
		"_thread_db_sizeof_pthread",
	};
	uint8_t *dst[8] = { NULL, db->specific, db->level2_data,
			    db->key_data_seq, db->key_data_data, db->keys,
			    db->key_struct_seq, db->sizeof_pthread };
	struct ivm_uelf_symbol ds[8];
	struct ivm_uelf lh;
	bool df[8];
	size_t i;

	lookup(LIBC, &lh, db_names, 8, ds, df);
	for (i = 0; i < 8; i++) {
		cr_assert(df[i], "%s not in libc", db_names[i]);
		if (i)
			cr_assert_null(ivm_uelf_read(&file, &lh, ds[i].value,
						     dst[i],
						     i == 7 ? 4 : 12));
	}
	cr_assert_eq(ds[0].table, IVM_UELF_DYNSYM);
	*keys = ds[0].value;
	ivm_uelf_host_file_close(&host);
}

/*
 * glibc's layout for the workload: from the libc it maps (its
 * libthread_db descriptors, read from the host file: the same file), or
 * the built-in one for a static build.
 */
static void layout_for(const struct ivm_uelf_symbol *sym, const bool *found,
		       uint64_t bias, struct ivm_pthread_layout *l)
{
	struct ivm_pthread_db db;
	char maps[64], line[512];
	unsigned long long start = 0, off;
	uint64_t keys;
	FILE *f;

	if (found[KEYS]) {
		*l = ivm_pthread_layout_glibc;
		l->keys = bias + sym[KEYS].value;
		return;
	}
	libc_db(&db, &keys);
	snprintf(maps, sizeof(maps), "/proc/%d/maps", workload);
	f = fopen(maps, "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (strstr(line, "libc.so.6") &&
		    sscanf(line, "%llx-%*x %*s %llx", &start, &off) == 2 && !off)
			break;
	fclose(f);
	cr_assert(start, "libc not mapped");
	cr_assert_null(ivm_pthread_layout_from_db(&db, start + keys, l));
	cr_assert_eq(l->specific_1stblock, UINT32_MAX, "descriptors do not say");
}

static void check_program(const char *bin)
{
	struct worker_line w[2];
	struct ivm_uelf_symbol sym[NR_NAMES];
	struct ivm_uelf h;
	struct ivm_pthread_layout l;
	bool found[NR_NAMES];
	uint64_t bias, tp, addr, v;
	struct ivm_error *err;
	uint8_t b[8];
	char text[128];
	int k;

	start_workload(bin, w);
	lookup(bin, &h, names, NR_NAMES, sym, found);
	ivm_uelf_host_file_close(&host);
	for (k = 0; k < KEYS; k++)
		cr_assert(found[k], "%s: %s not found", bin, names[k]);
	cr_assert(!found[NONE]);
	cr_assert_eq(sym[WORKER].type, STT_TLS);
	cr_assert_gt(h.tls_memsz, 0);
	bias = bias_of(bin, &h);
	layout_for(sym, found, bias, &l);

	for (k = 0; k < 2; k++) {
		tp = fs_base_of(w[k].tid);
		/* tls: the address the thread printed, its number there. */
		cr_assert_null(ivm_tls_static_address(tp, h.tls_vaddr,
						      h.tls_memsz, h.tls_align,
						      sym[WORKER].value, &addr));
		cr_assert_eq(addr, w[k].tls_addr, "%s: tls %#lx, printed %#lx",
			     bin, (unsigned long)addr,
			     (unsigned long)w[k].tls_addr);
		cr_assert_null(umem.read(NULL, addr, b, 4));
		cr_assert_null(ivm_label_format(&umem, IVM_LABEL_INT,
						ivm_le32(b), text,
						sizeof(text)));
		cr_assert_eq(atoi(text), w[k].n);
		/* tls, :str: a pointer to "worker-N". */
		cr_assert_null(ivm_tls_static_address(tp, h.tls_vaddr,
						      h.tls_memsz, h.tls_align,
						      sym[WORKER_NAME].value,
						      &addr));
		cr_assert_null(umem.read(NULL, addr, b, 8));
		cr_assert_null(ivm_label_format(&umem, IVM_LABEL_STR,
						ivm_le64(b), text,
						sizeof(text)));
		cr_assert_eq(strncmp(text, "worker-", 7), 0, "%s", text);
		cr_assert_eq(atoi(text + 7), w[k].n);

		/* key: the tenant string, the far number, and NULL. */
		cr_assert_null(umem.read(NULL, bias + sym[K_TENANT].value, b, 4));
		cr_assert_null(ivm_pthread_getspecific(&umem, &l, tp,
						       ivm_le32(b), &v));
		cr_assert_null(ivm_label_format(&umem, IVM_LABEL_STR, v, text,
						sizeof(text)));
		cr_assert_str_eq(text, w[k].tenant);
		cr_assert_null(umem.read(NULL, bias + sym[K_FAR].value, b, 4));
		cr_assert_geq(ivm_le32(b), 32, "a second-level key");
		cr_assert_null(ivm_pthread_getspecific(&umem, &l, tp,
						       ivm_le32(b), &v));
		cr_assert_eq(v, w[k].far);
		cr_assert_null(umem.read(NULL, bias + sym[K_REUSED].value, b, 4));
		cr_assert_null(ivm_pthread_getspecific(&umem, &l, tp,
						       ivm_le32(b), &v));
		cr_assert_eq(v, 0, "%s: the stale value of a deleted key", bin);
		/* A thread pointer that is no thread's: refused. */
		err = ivm_pthread_getspecific(&umem, &l, tp + 64, ivm_le32(b),
					      &v);
		cr_assert_not_null(err);
		ivm_error_destroy(err);
	}
	/* var: at the bias; what the program printed. */
	cr_assert_eq(bias + sym[CODE].value, w[0].code_addr);
	cr_assert_null(umem.read(NULL, bias + sym[CODE].value, b, 4));
	cr_assert_eq(ivm_le32(b), 31337);
	cr_assert_null(umem.read(NULL, bias + sym[NAME].value, b, 8));
	cr_assert_null(ivm_label_format(&umem, IVM_LABEL_STR, ivm_le64(b), text,
					sizeof(text)));
	cr_assert_str_eq(text, "labelset");
	cr_assert_null(umem.read(NULL, bias + sym[BIG].value, b, 8));
	cr_assert_null(ivm_label_format(&umem, IVM_LABEL_U64, ivm_le64(b), text,
					sizeof(text)));
	cr_assert_str_eq(text, "1311768467463790320");
	live_workload_stop();
}

Test(labels_real, static_glibc, .timeout = 120)
{
	check_program("build/guest/labelset");
}

Test(labels_real, static_pie_glibc, .timeout = 120)
{
	check_program("build/guest/labelset-pie");
}

Test(labels_real, dynamic_glibc, .timeout = 120)
{
	check_program("build/guest/labelset-dyn");
}

/* ---- the built-in layout against glibc's own word for it ------------------ */

/* Offset of member name in the DWARF struct die, or -1. */
static long member_offset(Dwarf_Die *die, const char *name)
{
	Dwarf_Die child;
	Dwarf_Attribute a;
	Dwarf_Word off;

	if (dwarf_child(die, &child))
		return -1;
	do {
		if (dwarf_tag(&child) == DW_TAG_member &&
		    dwarf_diename(&child) && !strcmp(dwarf_diename(&child), name) &&
		    dwarf_attr(&child, DW_AT_data_member_location, &a) &&
		    !dwarf_formudata(&a, &off))
			return (long)off;
	} while (!dwarf_siblingof(&child, &child));
	return -1;
}

Test(labels, builtin_layout_is_libc6_dbg_struct_pthread)
{
	struct ivm_uelf h;
	struct ivm_uelf_symbol s;
	struct ivm_pthread_db db = { 0 };
	struct ivm_pthread_layout l;
	static const char *const id_name[] = { "__pthread_keys" };
	char path[256], hex[41];
	uint8_t id[64];
	size_t len, i;
	Dwarf_Off off = 0, next;
	size_t hsize;
	bool found, incomplete, seen = false;
	struct ivm_error *err;
	uint64_t keys;
	Dwarf *dw;
	int fd;

	/* The host libc's build-id names its debug file (libc6-dbg). */
	cr_assert_null(ivm_uelf_host_file_open(LIBC, &host, &file));
	cr_assert_null(ivm_uexe_file_build_id(&file, id, &len));
	cr_assert_null(ivm_uelf_parse(&file, &h));
	cr_assert_null(ivm_uelf_find_symbols(&file, &h, 0, id_name, 1, &s,
					     &found, &incomplete));
	cr_assert(found);
	ivm_uelf_host_file_close(&host);
	for (i = 0; i < len && i < 20; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	snprintf(path, sizeof(path), "%s/%.2s/%s.debug", LIBC_DEBUG_DIR, hex,
		 hex + 2);
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0, "%s: %s (install libc6-dbg: scripts/install-deps)",
		      path, strerror(errno));
	dw = dwarf_begin(fd, DWARF_C_READ);
	cr_assert(dw, "%s: no DWARF", path);
	while (!seen && !dwarf_nextcu(dw, off, &next, &hsize, NULL, NULL, NULL)) {
		Dwarf_Die cu, d;

		if (dwarf_offdie(dw, off + hsize, &cu) && !dwarf_child(&cu, &d)) {
			do {
				if (dwarf_tag(&d) != DW_TAG_structure_type ||
				    !dwarf_diename(&d) ||
				    strcmp(dwarf_diename(&d), "pthread") ||
				    member_offset(&d, "specific") < 0)
					continue;
				cr_assert_eq(member_offset(&d, "specific"),
					     ivm_pthread_layout_glibc.specific);
				cr_assert_eq(member_offset(&d, "specific_1stblock"),
					     ivm_pthread_layout_glibc.specific_1stblock);
				cr_assert_eq(dwarf_bytesize(&d),
					     ivm_pthread_layout_glibc.sizeof_pthread);
				seen = true;
				break;
			} while (!dwarf_siblingof(&d, &d));
		}
		off = next;
	}
	dwarf_end(dw);
	close(fd);
	cr_assert(seen, "no struct pthread in %s", path);

	/* And the descriptors glibc exports for debuggers say the same. */
	libc_db(&db, &keys);
	cr_assert_null(ivm_pthread_layout_from_db(&db, 0x1000, &l));
	cr_assert_eq(l.specific, ivm_pthread_layout_glibc.specific);
	cr_assert_eq(l.level1, ivm_pthread_layout_glibc.level1);
	cr_assert_eq(l.level2, ivm_pthread_layout_glibc.level2);
	cr_assert_eq(l.key_data_size, ivm_pthread_layout_glibc.key_data_size);
	cr_assert_eq(l.key_data_data, ivm_pthread_layout_glibc.key_data_data);
	cr_assert_eq(l.keys_max, ivm_pthread_layout_glibc.keys_max);
	cr_assert_eq(l.sizeof_pthread, ivm_pthread_layout_glibc.sizeof_pthread);
	/* A descriptor out of bounds is refused. */
	db.key_data_data[8] = 0x10;
	err = ivm_pthread_layout_from_db(&db, 0x1000, &l);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
}

/* ---- the reader as captures use it -------------------------------------------- */

/*
 * ivm_labels_read on a live static build, its executable from the host
 * file (as with --binary): every kind of label, a symbol the program
 * lacks (no label, counted absent), and the counts.
 */
static void check_reader(const char *bin)
{
	static const char *const args[] = {
		"worker=tls:labelset_worker", "wname=tls:labelset_worker_name:str",
		"code=var:labelset_code", "name=var:labelset_name:str",
		"big=var:labelset_big:u64", "tenant=key:labelset_key_tenant:str",
		"far=key:labelset_key_far:u64", "reused=key:labelset_key_reused:str",
		"none=var:no_such_symbol_anywhere",
	};
	enum { NR = sizeof(args) / sizeof(args[0]) };
	struct ivm_label_spec specs[NR];
	struct ivm_labels_guest g = { 0 };
	struct ivm_labels *l;
	struct ivm_label out[IVM_LABELS_MAX];
	struct ivm_uelf h;
	struct ivm_uexe exe = { 0 };
	struct worker_line w[2];
	char want[IVM_LABELS_MAX][64];
	size_t i, nr;
	int k;

	cr_assert_eq(NR, IVM_LABELS_MAX + 1, "one more than fits: split in two");
	for (i = 0; i < NR; i++)
		cr_assert_null(ivm_label_spec_parse(args[i], &specs[i]));
	start_workload(bin, w);
	cr_assert_null(ivm_uelf_host_file_open(bin, &host, &file));
	cr_assert_null(ivm_uelf_parse(&file, &h));
	ivm_uelf_host_file_close(&host);
	exe.dyn = h.type == ET_DYN;
	exe.bias = bias_of(bin, &h);
	/* The first 8, then the absent one with one of them. */
	cr_assert_null(ivm_labels_create(specs, IVM_LABELS_MAX, &g, &l));
	for (k = 0; k < 2; k++) {
		struct ivm_label_target t = {
			.pid = (uint32_t)workload, .tid = (uint32_t)w[k].tid,
			.mm = 0x1000, .cr3 = 0x2000, .fsbase = fs_base_of(w[k].tid),
			.exe = &exe, .host_path = bin, .umem = &umem,
		};

		snprintf(want[0], 64, "%d", w[k].n);
		snprintf(want[1], 64, "worker-%d", w[k].n);
		snprintf(want[2], 64, "31337");
		snprintf(want[3], 64, "labelset");
		snprintf(want[4], 64, "1311768467463790320");
		snprintf(want[5], 64, "%s", w[k].tenant);
		snprintf(want[6], 64, "%lu", w[k].far);
		snprintf(want[7], 64, "(null)");
		ivm_labels_read(l, &t, 1000, out, &nr);
		cr_assert_eq(nr, IVM_LABELS_MAX);
		for (i = 0; i < nr; i++) {
			cr_assert_str_eq(out[i].key, specs[i].key);
			cr_assert_str_eq(out[i].value, want[i], "%s: %s is %s",
					 bin, out[i].key, out[i].value);
		}
	}
	for (i = 0; i < IVM_LABELS_MAX; i++) {
		cr_assert_eq(ivm_labels_stats(l, i)->read, 2);
		cr_assert_eq(ivm_labels_stats(l, i)->unreadable, 0);
	}
	ivm_labels_destroy(l);

	specs[0] = specs[NR - 1];
	cr_assert_null(ivm_labels_create(specs, 2, &g, &l));
	{
		struct ivm_label_target t = {
			.mm = 0x1000, .cr3 = 0x2000,
			.fsbase = fs_base_of(w[0].tid), .exe = &exe,
			.host_path = bin, .umem = &umem,
		};

		ivm_labels_read(l, &t, 1000, out, &nr);
		cr_assert_eq(nr, 1, "no label for a symbol the program lacks");
		cr_assert_str_eq(out[0].key, "wname");
		cr_assert_eq(ivm_labels_stats(l, 0)->absent, 1);
		/* A thread pointer that is not the thread's: "?", counted. */
		t.fsbase += 4096;
		ivm_labels_read(l, &t, 2000, out, &nr);
		cr_assert_eq(nr, 1);
		cr_assert_str_eq(out[0].value, "?", "never a wrong value");
		cr_assert_eq(ivm_labels_stats(l, 1)->unreadable, 1);
		cr_assert_str_eq(ivm_labels_last_why(l, 1),
				 "the fs base holds no thread control block");
	}
	ivm_labels_destroy(l);
	live_workload_stop();
}

Test(labels_real, reader_static, .timeout = 120)
{
	check_reader("build/guest/labelset");
}

Test(labels_real, reader_static_pie, .timeout = 120)
{
	check_reader("build/guest/labelset-pie");
}
