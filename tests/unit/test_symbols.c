// SPDX-License-Identifier: MIT
/*
 * symbols/: the guest kernel's real vmlinux (DWARF, inline frames,
 * file:line, banner, build-id, cross-checked against eu-addr2line), a small
 * ELF built here (separate debuginfo found by build-id in a symbol
 * directory, stripped fallback), System.map, and damaged files.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "syms.h"
#include "symfile.h"
#include "tmp_files.h"

#define KDIR "/var/cache/idlevm/6.1.0-56-cloud-amd64"
#define VMLINUX KDIR "/vmlinux"
#define SYSTEM_MAP KDIR "/System.map"
#define RELEASE "6.1.0-56-cloud-amd64"

static void need_vmlinux(void)
{
	if (access(VMLINUX, R_OK) || access(SYSTEM_MAP, R_OK))
		cr_skip_test("%s or its System.map not present (make image)",
			     VMLINUX);
}

/* Address of a text symbol, from the System.map. */
static uint64_t map_addr(const char *name)
{
	char line[512], addr[32], type[4], sym[256];
	uint64_t found = 0;
	FILE *f = fopen(SYSTEM_MAP, "r");

	cr_assert(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%31s %3s %255s", addr, type, sym) == 3 &&
		    !strcmp(sym, name)) {
			found = strtoull(addr, NULL, 16);
			break;
		}
	fclose(f);
	cr_assert(found, "%s not in System.map", name);
	return found;
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = s ? strlen(s) : 0, b = strlen(suffix);

	return s && a >= b && !strcmp(s + a - b, suffix);
}

Test(symbols_vmlinux, identity_and_function_line)
{
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	const struct ivm_sym_location *loc;
	uint64_t fwq;

	need_vmlinux();
	err = ivm_symfile_open_elf(VMLINUX, &f);
	cr_assert_null(err, "%s", ivm_sym_error_string(err));
	cr_assert_str_eq(ivm_symfile_kernel_release(f), RELEASE);
	cr_assert_eq(strlen(ivm_symfile_build_id_hex(f)), 40);
	cr_assert(ivm_symfile_has_dwarf(f));

	fwq = map_addr("futex_wait_queue");
	loc = ivm_symfile_lookup(f, fwq + 0x10);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_DWARF);
	cr_assert_geq(loc->nr_frames, 1);
	cr_assert_str_eq(loc->frames[loc->nr_frames - 1].function,
			 "futex_wait_queue");
	cr_assert_eq(loc->offset, 0x10);
	cr_assert(ends_with(loc->frames[0].file, "kernel/futex/waitwake.c") ||
		  loc->frames[0].inlined, "file %s", loc->frames[0].file);
	cr_assert_gt(loc->frames[0].line, 0);

	/* The cache answers the second time with the same location. */
	cr_assert_eq(ivm_symfile_lookup(f, fwq + 0x10), loc);
	ivm_symfile_destroy(f);
}

/* eu-addr2line -f -i's function chain for addr, innermost first. */
static size_t eu_chain(uint64_t addr, char names[][128], size_t max)
{
	char cmd[512], line[128];
	size_t n = 0, i = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "eu-addr2line -f -i -e %s 0x%" PRIx64,
		 VMLINUX, addr);
	p = popen(cmd, "r");
	if (!p)
		return 0;
	while (fgets(line, sizeof(line), p)) {
		/* Lines alternate: function, then file:line. */
		if (i++ % 2 == 0 && n < max) {
			line[strcspn(line, " \n")] = '\0';
			snprintf(names[n++], 128, "%s", line);
		}
	}
	pclose(p);
	return n;
}

Test(symbols_vmlinux, inline_frames_match_eu_addr2line, .timeout = 60)
{
	struct ivm_symfile *f;
	const struct ivm_sym_location *loc = NULL;
	uint64_t sched, a;
	char eu[IVM_SYM_MAX_INLINE][128];
	size_t n, i;

	need_vmlinux();
	sched = map_addr("__schedule");
	if (access("/usr/bin/eu-addr2line", X_OK))
		cr_skip_test("eu-addr2line (elfutils) not installed");
	cr_assert_null(ivm_symfile_open_elf(VMLINUX, &f));
	/* The context switch is inlined into __schedule. */
	for (a = sched; a < sched + 0x1000; a++) {
		loc = ivm_symfile_lookup(f, a);
		if (loc->nr_frames >= 2 && loc->frames[0].function &&
		    !strcmp(loc->frames[0].function, "context_switch"))
			break;
	}
	cr_assert_lt(a, sched + 0x1000, "no inlined context_switch found");
	cr_assert(loc->frames[0].inlined);
	cr_assert_str_eq(loc->frames[loc->nr_frames - 1].function,
			 "__schedule");
	cr_assert(!loc->frames[loc->nr_frames - 1].inlined);
	/* The outer frame's position is the call site, in core.c. */
	cr_assert(ends_with(loc->frames[1].file, "kernel/sched/core.c"),
		  "%s", loc->frames[1].file);
	cr_assert_gt(loc->frames[1].line, 0);

	n = eu_chain(a, eu, IVM_SYM_MAX_INLINE);
	cr_assert_eq(n, loc->nr_frames, "eu-addr2line: %zu frames, us %u", n,
		     loc->nr_frames);
	for (i = 0; i < n; i++)
		cr_assert_str_eq(loc->frames[i].function, eu[i],
				 "frame %zu at 0x%" PRIx64, i, a);
	ivm_symfile_destroy(f);
}

struct log_capture {
	char text[4096];
};

static void capture_log(void *ctx, const char *msg)
{
	struct log_capture *lc = ctx;
	size_t l = strlen(lc->text);

	snprintf(lc->text + l, sizeof(lc->text) - l, "%s\n", msg);
}

Test(symbols_vmlinux, slide_release_mismatch_and_system_map)
{
	struct log_capture lc = { "" };
	struct ivm_syms_config cfg = {
		.vmlinux = VMLINUX, .kernel_release = RELEASE,
		.kaslr_offset = 0x29c00000, .log = capture_log, .log_ctx = &lc,
	};
	const struct ivm_sym_location *loc;
	struct ivm_syms *s;
	uint64_t fwq;

	need_vmlinux();
	fwq = map_addr("futex_wait_queue");
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_str_eq(ivm_syms_kernel_source(s), VMLINUX);
	loc = ivm_syms_kernel(s, fwq + 0x29c00000 + 4);
	cr_assert_str_eq(loc->frames[loc->nr_frames - 1].function,
			 "futex_wait_queue");
	/* Outside the image (a module): raw, not the nearest kernel name. */
	cr_assert_eq(ivm_syms_kernel(s, 0xffffffffc0001000ull)->source,
		     IVM_SYM_SOURCE_NONE);
	ivm_syms_destroy(s);

	/* Another release: the vmlinux is refused, said so, frames raw. */
	cfg.kernel_release = "6.1.0-99-cloud-amd64";
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_null(ivm_syms_kernel_source(s));
	cr_assert(strstr(lc.text, "not used"), "log: %s", lc.text);
	cr_assert_eq(ivm_syms_kernel(s, fwq + 0x29c00000)->source,
		     IVM_SYM_SOURCE_NONE);
	ivm_syms_destroy(s);

	/* ...and with a System.map, names only. */
	cfg.system_map = SYSTEM_MAP;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	loc = ivm_syms_kernel(s, fwq + 0x29c00000 + 4);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_SYMTAB);
	cr_assert_str_eq(loc->frames[0].function, "futex_wait_queue");
	cr_assert_null(loc->frames[0].file);
	ivm_syms_destroy(s);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char truncated_path[] = "/tmp/ivm-test-sym-XXXXXX";

static void unlink_truncated(void)
{
	if (IVM_TMP_MADE(truncated_path))
		unlink(truncated_path);
}

Test(symbols_vmlinux, truncated_vmlinux_is_a_clear_error,
     .fini = unlink_truncated)
{
	char *path = truncated_path;
	char buf[65536];
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	FILE *in, *out;
	size_t i;
	int fd;

	need_vmlinux();
	fd = mkstemp(path);
	cr_assert_geq(fd, 0);
	out = fdopen(fd, "w");
	in = fopen(VMLINUX, "r");
	cr_assert(in && out);
	/* The first 8 MB: ELF header fine, sections and tables gone. */
	for (i = 0; i < 128; i++) {
		size_t n = fread(buf, 1, sizeof(buf), in);

		cr_assert_eq(fwrite(buf, 1, n, out), n);
	}
	fclose(in);
	fclose(out);
	err = ivm_symfile_open_elf(path, &f);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_SYM_ERROR_FORMAT, "%s",
		     ivm_sym_error_string(err));
	cr_assert(strstr(ivm_sym_error_string(err), path), "%s",
		  ivm_sym_error_string(err));
	ivm_sym_error_destroy(err);
}

/* ---- a small ELF built here -------------------------------------------- */

static const char tiny_src[] =
	"static inline __attribute__((always_inline)) int twice(int x)\n"
	"{\n"
	"	return x * 2 + (x > 7 ? x / 3 : 1);\n"	/* line 3 */
	"}\n"
	"__attribute__((noinline)) int outer(int x)\n"
	"{\n"
	"	return twice(x) + twice(x + 1);\n"	/* line 7 */
	"}\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	return outer(argc);\n"
	"}\n";

struct tiny {
	char bin[128];
	char stripped[128];
	char symdir[128];
};

/* Removed by the suite's fini, which runs after a failed assertion too. */
static char tiny_dir[] = "/tmp/ivm-test-tiny-XXXXXX";

static void tiny_clean(void)
{
	IVM_TMP_REMOVE_TREE(tiny_dir);
}

TestSuite(symbols_tiny, .fini = tiny_clean);

static void tiny_build(struct tiny *t)
{
	char cmd[1024];
	FILE *f;

	cr_assert(mkdtemp(tiny_dir));
	snprintf(cmd, sizeof(cmd), "%s/tiny.c", tiny_dir);
	f = fopen(cmd, "w");
	cr_assert(f);
	fputs(tiny_src, f);
	fclose(f);
	snprintf(t->bin, sizeof(t->bin), "%s/tiny", tiny_dir);
	snprintf(t->stripped, sizeof(t->stripped), "%s/tiny.stripped",
		 tiny_dir);
	snprintf(t->symdir, sizeof(t->symdir), "%s/sym", tiny_dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cc -g -O2 -static -Wl,--build-id -o tiny tiny.c && "
		 "objcopy --strip-debug tiny tiny.stripped", tiny_dir);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static uint64_t tiny_symbol(const char *bin, const char *name)
{
	char cmd[512];
	unsigned long long a = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "nm %s | awk '$3 == \"%s\" { print $1 }'",
		 bin, name);
	p = popen(cmd, "r");
	cr_assert(p);
	cr_assert_eq(fscanf(p, "%llx", &a), 1);
	pclose(p);
	return a;
}

Test(symbols_tiny, inline_frames_build_id_symdir_and_stripped, .timeout = 60)
{
	struct log_capture lc = { "" };
	struct tiny t;
	struct ivm_symfile *f;
	struct ivm_syms *s;
	const struct ivm_sym_location *loc = NULL;
	const char *bins[1];
	struct ivm_syms_config cfg = { .binaries = bins, .nr_binaries = 1,
				       .log = capture_log, .log_ctx = &lc };
	char cmd[1024], *debug;
	uint64_t outer, a;

	tiny_build(&t);
	outer = tiny_symbol(t.bin, "outer");
	cr_assert_null(ivm_symfile_open_elf(t.bin, &f));
	for (a = outer; a < outer + 64; a++) {
		loc = ivm_symfile_lookup(f, a);
		if (loc->nr_frames == 2)
			break;
	}
	cr_assert_eq(loc->nr_frames, 2, "no inlined twice() in outer()");
	cr_assert_str_eq(loc->frames[0].function, "twice");
	cr_assert(loc->frames[0].inlined);
	cr_assert(ends_with(loc->frames[0].file, "tiny.c"));
	cr_assert_eq(loc->frames[0].line, 3);
	cr_assert_str_eq(loc->frames[1].function, "outer");
	cr_assert_eq(loc->frames[1].line, 7);

	/* Stripped, no symdir: names only, and the log says why. */
	bins[0] = t.stripped;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	loc = ivm_syms_user(s, a);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_SYMTAB);
	cr_assert_str_eq(loc->frames[0].function, "outer");
	ivm_syms_destroy(s);

	/* Its debuginfo in DIR/.build-id/xx/rest.debug: full frames again. */
	debug = ivm_syms_build_id_path(t.symdir, ivm_symfile_build_id_hex(f));
	cr_assert(debug);
	snprintf(cmd, sizeof(cmd),
		 "mkdir -p $(dirname %s) && objcopy --only-keep-debug %s %s",
		 debug, t.bin, debug);
	cr_assert_eq(system(cmd), 0);
	cfg.symdir = t.symdir;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	loc = ivm_syms_user(s, a);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_DWARF, "log: %s", lc.text);
	cr_assert_eq(loc->nr_frames, 2);
	cr_assert_eq(loc->frames[0].line, 3);
	ivm_syms_destroy(s);

	/* A name only, found in the symbol directory. */
	snprintf(cmd, sizeof(cmd), "cp %s %s/tiny", t.bin, t.symdir);
	cr_assert_eq(system(cmd), 0);
	bins[0] = "tiny";
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_eq(ivm_syms_user(s, a)->nr_frames, 2);
	ivm_syms_destroy(s);

	/* A debug file of another build is refused by build-id. */
	free(debug);
	ivm_symfile_destroy(f);
}

/* ---- dwz: a supplementary DWARF file --------------------------------- */

/*
 * Debian's -dbgsym debug files are dwz'ed: DIEs shared by several files
 * (types, inline functions' abstract instances) sit in one supplementary
 * file that each refers to by .gnu_debugaltlink (path and build-id).  Two
 * builds of tiny.c (the second with one more function) share twice()'s
 * abstract instance.  The recorded path is where Debian puts such files
 * (/usr/lib/debug/.dwz/), but nothing is there on this host, as on a host
 * without the -dbgsym packages installed.
 */
static char dwz_dir[] = "/tmp/ivm-test-dwz-XXXXXX";
static char dwz_common[64];

static void dwz_clean(void)
{
	IVM_TMP_REMOVE_TREE(dwz_dir);
}

TestSuite(symbols_dwz, .fini = dwz_clean);

struct alt_finder {
	unsigned int calls;
	char asked[2 * IVM_SYM_BUILD_ID_MAX + 1];
	const char *answer;
};

static char *find_alt(void *ctx, const char *hex)
{
	struct alt_finder *af = ctx;

	af->calls++;
	snprintf(af->asked, sizeof(af->asked), "%s", hex);
	return af->answer ? strdup(af->answer) : NULL;
}

/* The function of the innermost frame at the first inlined pc in outer. */
static const char *inlined_name(struct ivm_syms *s, uint64_t outer)
{
	const struct ivm_sym_location *loc;
	uint64_t a;

	for (a = outer; a < outer + 64; a++) {
		loc = ivm_syms_user(s, a);
		if (loc->nr_frames == 2) {
			cr_assert(loc->frames[0].inlined);
			cr_assert_eq(loc->frames[0].line, 3);
			cr_assert_str_eq(loc->frames[1].function, "outer");
			return loc->frames[0].function;
		}
	}
	cr_assert_fail("no inlined frame in outer()");
	return NULL;
}

Test(symbols_dwz, supplementary_file_by_build_id, .timeout = 60)
{
	struct log_capture lc = { "" };
	struct alt_finder af = { 0 };
	const char *bins[1];
	struct ivm_syms_config cfg = { .binaries = bins, .nr_binaries = 1,
				       .log = capture_log, .log_ctx = &lc };
	char cmd[1024], a[96], b[96], symdir[96], id[2 * IVM_SYM_BUILD_ID_MAX + 1];
	struct ivm_syms *s;
	uint64_t outer;
	FILE *f, *p;

	if (access("/usr/bin/dwz", X_OK))
		cr_skip_test("no dwz (scripts/install-deps installs it)");
	cr_assert(mkdtemp(dwz_dir));
	snprintf(cmd, sizeof(cmd), "%s/tiny.c", dwz_dir);
	f = fopen(cmd, "w");
	cr_assert(f);
	fputs(tiny_src, f);
	fputs("#ifdef OTHER\nint other(int x) { return outer(x) + 1; }\n#endif\n",
	      f);
	fclose(f);
	snprintf(a, sizeof(a), "%s/a", dwz_dir);
	snprintf(b, sizeof(b), "%s/b", dwz_dir);
	snprintf(dwz_common, sizeof(dwz_common), "%s/common.debug", dwz_dir);
	snprintf(cmd, sizeof(cmd),
		 "cd %s && cc -g -O2 -Wl,--build-id -o a tiny.c && "
		 "cc -g -O2 -DOTHER -Wl,--build-id -o b tiny.c && "
		 "dwz -m common.debug -M /usr/lib/debug/.dwz/%s.debug a b && "
		 "readelf -S a | grep -q .gnu_debugaltlink", dwz_dir,
		 dwz_dir + 5);
	cr_assert_eq(system(cmd), 0, "%s", cmd);
	snprintf(cmd, sizeof(cmd),
		 "readelf -n %s | awk '/Build ID/ { print $3 }'", dwz_common);
	p = popen(cmd, "r");
	cr_assert(p);
	cr_assert_eq(fscanf(p, "%128s", id), 1);
	pclose(p);
	outer = tiny_symbol(a, "outer");
	bins[0] = a;

	/* Nowhere to find it: file:line still, no name, and the log says. */
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_null(inlined_name(s, outer));
	cr_assert(strstr(lc.text, "supplementary DWARF file") &&
		  strstr(lc.text, id), "log: %s", lc.text);
	ivm_syms_destroy(s);

	/* By its build-id in the symbol directory. */
	snprintf(symdir, sizeof(symdir), "%s/sym", dwz_dir);
	snprintf(cmd, sizeof(cmd), "mkdir -p %s/.build-id/%.2s && cp %s %s/.build-id/%.2s/%s.debug",
		 symdir, id, dwz_common, symdir, id, id + 2);
	cr_assert_eq(system(cmd), 0);
	cfg.symdir = symdir;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_str_eq(inlined_name(s, outer), "twice");
	ivm_syms_destroy(s);

	/* At its recorded path under a symbol directory (unpacked -dbgsym). */
	snprintf(cmd, sizeof(cmd), "rm -r %s/.build-id && mkdir %s/.dwz && cp %s %s/.dwz/%s.debug",
		 symdir, symdir, dwz_common, symdir, dwz_dir + 5);
	cr_assert_eq(system(cmd), 0);
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_str_eq(inlined_name(s, outer), "twice");
	ivm_syms_destroy(s);

	/* From the caller (debuginfod, in a report), asked by build-id. */
	cfg.symdir = NULL;
	cfg.find_by_build_id = find_alt;
	cfg.find_ctx = &af;
	af.answer = dwz_common;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_eq(af.calls, 1);
	cr_assert_str_eq(af.asked, id);
	cr_assert_str_eq(inlined_name(s, outer), "twice");
	ivm_syms_destroy(s);

	/* Another file under that build-id is refused, not trusted. */
	af.answer = b;
	lc.text[0] = 0;
	cr_assert_null(ivm_syms_create(&cfg, &s));
	cr_assert_null(inlined_name(s, outer));
	cr_assert(strstr(lc.text, "not the supplementary DWARF"), "log: %s",
		  lc.text);
	ivm_syms_destroy(s);
}

Test(symbols_tiny, corrupt_section_table)
{
	struct tiny t;
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	char cmd[512];

	tiny_build(&t);
	/* e_shoff (offset 0x28) pointing far past the end of the file. */
	snprintf(cmd, sizeof(cmd),
		 "printf '\\377\\377\\377\\177' | dd of=%s bs=1 seek=40 conv=notrunc status=none",
		 t.bin);
	cr_assert_eq(system(cmd), 0);
	err = ivm_symfile_open_elf(t.bin, &f);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_SYM_ERROR_FORMAT, "%s",
		     ivm_sym_error_string(err));
	ivm_sym_error_destroy(err);
}

Test(symbols_map, parse_and_lookup)
{
	static const char map[] =
		"ffffffff81000000 T _stext\n"
		"garbage line\n"
		"ffffffff81000100 t helper\n"
		"ffffffff81000100 T helper_alias\n"
		"ffffffff82000000 D some_data\n"
		"ffffffff81000200 T last\n"
		"ffffffff81000300 T _etext\n"
		"zzzz T bad\n";
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	const struct ivm_sym_location *loc;

	cr_assert_null(ivm_symfile_system_map_from_memory("map", map,
							  sizeof(map) - 1, &f));
	cr_assert_eq(ivm_symfile_nr_symbols(f), 4);
	loc = ivm_symfile_lookup(f, 0xffffffff81000180);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_SYMTAB);
	/* Of two names at one address, the global one. */
	cr_assert_str_eq(loc->frames[0].function, "helper_alias");
	cr_assert_eq(loc->offset, 0x80);
	cr_assert_eq(ivm_symfile_lookup(f, 0xffffffff80000000)->source,
		     IVM_SYM_SOURCE_NONE);
	ivm_symfile_destroy(f);

	err = ivm_symfile_system_map_from_memory("x", "abc", 3, &f);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_SYM_ERROR_FORMAT);
	ivm_sym_error_destroy(err);
}

Test(symbols_map, build_id_path)
{
	char *p = ivm_syms_build_id_path("/s", "3b43fad5034874490492495d55");

	cr_assert_str_eq(p, "/s/.build-id/3b/43fad5034874490492495d55.debug");
	free(p);
	cr_assert_null(ivm_syms_build_id_path("/s", "3b4"));
	cr_assert_null(ivm_syms_build_id_path("/s", "../etc"));
}
