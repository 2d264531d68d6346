// SPDX-License-Identifier: MIT
/*
 * symbols/ and guest kernel modules: the real virtio_console.ko debug file
 * of the test guest's kernel (from its -dbg package), placed at the section
 * addresses a real guest loaded it at (tests/unit/data/virtio_console/),
 * must name every function the guest's own /proc/kallsyms lists there, and
 * agree with eu-addr2line on the .ko; a wrong build-id, a missing file or
 * no file at all give "virtio_console:+0x..." and never another name.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "symfile.h"
#include "syms.h"
#include "tmp_files.h"

#define RELEASE "6.1.0-56-cloud-amd64"
#define DEBUG_DIR "/var/cache/idlevm/" RELEASE "/debug"
#define KO DEBUG_DIR "/lib/modules/" RELEASE \
	"/kernel/drivers/char/virtio_console.ko"
#define DATA "tests/unit/data/virtio_console/"
#define BUILD_ID "2a4768ab9c201b9aa409616706c4aafd0defc4be"
#define MAX_SECTIONS 64
#define MAX_SYMS 128

struct guest_module {
	struct ivm_sym_section_addr sections[MAX_SECTIONS];
	char names[MAX_SECTIONS][64];
	size_t nr_sections;
	struct {
		uint64_t addr;
		char name[128];
	} syms[MAX_SYMS];
	size_t nr_syms;
	uint64_t base, size;
};

static void need_ko(void)
{
	if (access(KO, R_OK))
		cr_skip_test("%s not present (images/build-image extracts it)",
			     KO);
}

static void read_guest(struct guest_module *g)
{
	char line[512], name[128], type[4];
	unsigned long long addr, size;
	FILE *f;

	memset(g, 0, sizeof(*g));
	f = fopen(DATA "sections", "r");
	cr_assert(f, "cannot read " DATA "sections");
	while (fgets(line, sizeof(line), f) && g->nr_sections < MAX_SECTIONS)
		if (sscanf(line, "%63s %llx", g->names[g->nr_sections],
			   &addr) == 2) {
			g->sections[g->nr_sections].name =
				g->names[g->nr_sections];
			g->sections[g->nr_sections++].addr = addr;
		}
	fclose(f);
	f = fopen(DATA "kallsyms", "r");
	cr_assert(f);
	while (fgets(line, sizeof(line), f) && g->nr_syms < MAX_SYMS)
		if (sscanf(line, "%llx %3s %127s", &addr, type, name) == 3) {
			g->syms[g->nr_syms].addr = addr;
			snprintf(g->syms[g->nr_syms++].name, 128, "%s", name);
		}
	fclose(f);
	f = fopen(DATA "proc_modules", "r");
	cr_assert(f);
	cr_assert(fgets(line, sizeof(line), f));
	cr_assert_eq(sscanf(line, "%127s %llu %*s %*s %*s %llx", name, &size,
			    &addr), 3);
	g->base = addr;
	g->size = size;
	fclose(f);
	cr_assert_gt(g->nr_sections, 10);
	cr_assert_gt(g->nr_syms, 40);
}

static uint64_t section_addr(const struct guest_module *g, const char *name)
{
	size_t i;

	for (i = 0; i < g->nr_sections; i++)
		if (!strcmp(g->sections[i].name, name))
			return g->sections[i].addr;
	cr_assert_fail("no section %s", name);
	return 0;
}

static const char *outer(const struct ivm_sym_location *loc)
{
	return loc->nr_frames ? loc->frames[loc->nr_frames - 1].function :
				NULL;
}

/*
 * DWARF names the source function: "__send_control_msg" for the symbol
 * "__send_control_msg.isra.0" (a clone GCC made), as eu-addr2line does.
 */
static bool same_function(const char *ours, const char *symbol)
{
	size_t n = ours ? strlen(ours) : 0;

	return ours && !strncmp(ours, symbol, n) &&
	       (symbol[n] == '\0' || symbol[n] == '.');
}

Test(symbols_modules, every_guest_function_is_named, .timeout = 60)
{
	struct guest_module g;
	struct ivm_symfile *f;
	struct ivm_sym_error *err;
	size_t i, dwarf = 0, inlined = 0;

	need_ko();
	read_guest(&g);
	err = ivm_symfile_open_module(KO, "virtio_console", g.sections,
				      g.nr_sections, &f);
	cr_assert_null(err, "%s", err ? ivm_sym_error_string(err) : "");
	cr_assert_str_eq(ivm_symfile_build_id_hex(f), BUILD_ID);
	cr_assert(ivm_symfile_has_dwarf(f));
	for (i = 0; i < g.nr_syms; i++) {
		uint64_t a = g.syms[i].addr;
		/* module_exit(f) makes cleanup_module an alias of f. */
		const char *want = strcmp(g.syms[i].name, "cleanup_module") ?
				   g.syms[i].name : "virtio_console_fini";
		const struct ivm_sym_location *loc;
		size_t j;

		/* Its first byte, and a byte inside it, as a pc - 1 is. */
		for (j = 0; j < 2; j++) {
			loc = ivm_symfile_lookup(f, a + j * 3);
			cr_assert(ivm_symfile_in_text(f, a + j * 3));
			cr_assert(same_function(outer(loc), want),
				  "0x%" PRIx64 ": %s, the guest says %s",
				  a + j * 3, outer(loc), g.syms[i].name);
			cr_assert_eq(loc->offset, j * 3);
		}
		if (loc->source == IVM_SYM_SOURCE_DWARF &&
		    loc->frames[0].file && strstr(loc->frames[0].file,
						  "virtio_console.c"))
			dwarf++;
	}
	/* Every function is C from virtio_console.c, with file:line. */
	cr_assert_geq(dwarf, g.nr_syms - 2, "%zu of %zu from DWARF", dwarf,
		      g.nr_syms);
	/* Its .text has inlined calls somewhere: DWARF was relocated. */
	for (i = 0; i < 0x3800 && !inlined; i += 4)
		inlined = ivm_symfile_lookup(f, section_addr(&g, ".text") +
					     i)->nr_frames > 1;
	cr_assert(inlined, "no inline frame in the whole .text");
	/* .init.text is freed and reused by the guest: never named. */
	cr_assert(!ivm_symfile_in_text(f, section_addr(&g, ".init.text")));
	ivm_symfile_destroy(f);
}

/* eu-addr2line -j .text on the .ko: section offsets, the same chains. */
Test(symbols_modules, inline_chains_match_eu_addr2line, .timeout = 60)
{
	struct guest_module g;
	struct ivm_symfile *f;
	uint64_t text;
	char cmd[1024], line[1024];
	size_t compared = 0, chains = 0, same_chains = 0;
	FILE *p;

	need_ko();
	if (access("/usr/bin/eu-addr2line", X_OK))
		cr_skip_test("eu-addr2line (elfutils) not installed");
	read_guest(&g);
	cr_assert_null(ivm_symfile_open_module(KO, "virtio_console",
					       g.sections, g.nr_sections, &f));
	text = section_addr(&g, ".text");
	/* Every 0x35 bytes of .text (0x385d long). */
	snprintf(cmd, sizeof(cmd),
		 "for i in $(seq 0 53 14400); do printf '0x%%x\\n' $i; done | "
		 "eu-addr2line -a -f -i -e %s -j .text", KO);
	p = popen(cmd, "r");
	cr_assert(p);
	while (fgets(line, sizeof(line), p)) {
		const struct ivm_sym_location *loc;
		char eu[16][128];
		uint64_t off;
		unsigned int i, neu;
		bool same;

		/*
		 * eu echoes the address in its own layout of the .ko, not
		 * the offset asked: the answers come in the order asked.
		 */
		cr_assert(!strncmp(line, "0x", 2), "eu-addr2line: %s", line);
		off = 53 * compared;
		loc = ivm_symfile_lookup(f, text + off);
		/* Frames: function, then file:line, until the next address. */
		neu = 0;
		for (;;) {
			int c = fgetc(p);

			ungetc(c, p);
			if (c == EOF || c == '0')
				break;
			cr_assert(fgets(line, sizeof(line), p));
			line[strcspn(line, " \n")] = '\0';
			if (neu < 16)
				snprintf(eu[neu++], sizeof(eu[0]), "%.127s",
					 line);
			cr_assert(fgets(line, sizeof(line), p));
		}
		/* The code at the address, and the function holding it. */
		cr_assert(neu && loc->nr_frames, ".text+0x%" PRIx64, off);
		cr_assert_str_eq(loc->frames[0].function ?
				 loc->frames[0].function : "??", eu[0],
				 ".text+0x%" PRIx64, off);
		cr_assert_str_eq(outer(loc) ? outer(loc) : "??", eu[neu - 1],
				 ".text+0x%" PRIx64, off);
		same = neu == loc->nr_frames;
		for (i = 0; same && i < neu; i++)
			same = !strcmp(loc->frames[i].function ?
				       loc->frames[i].function : "??", eu[i]);
		same_chains += same;
		compared++;
		chains += neu > 1;
	}
	pclose(p);
	cr_assert_gt(compared, 250);
	cr_assert_gt(chains, 20, "only %zu inline chains", chains);
	/*
	 * eu-addr2line drops an inlined frame whose own ranges miss the
	 * address while a nested one holds it (GCC leaves such holes, e.g.
	 * kmap_atomic around lowmem_page_address in pipe_to_sg); idlevm
	 * keeps the DIE nesting.  Everything else is the same chain.
	 */
	cr_log_info("%zu of %zu chains as eu-addr2line's (%zu inlined)",
		    same_chains, compared, chains);
	cr_assert_geq(same_chains * 100, compared * 99,
		      "%zu of %zu chains as eu-addr2line's", same_chains,
		      compared);
	ivm_symfile_destroy(f);
}

struct log_capture {
	char text[8192];
};

static void capture_log(void *ctx, const char *msg)
{
	struct log_capture *lc = ctx;
	size_t l = strlen(lc->text);

	snprintf(lc->text + l, sizeof(lc->text) - l, "%s\n", msg);
}

static struct ivm_syms *syms_with(const struct guest_module *g,
				  const char *build_id, bool base,
				  const char *module_dir,
				  struct log_capture *lc)
{
	struct ivm_syms_module mod = {
		.name = "virtio_console",
		.build_id = build_id,
		.base = base ? g->base : 0,
		.size = base ? g->size : 0,
		.sections = g->sections,
		.nr_sections = g->nr_sections,
	};
	struct ivm_syms_config cfg = {
		.kernel_release = RELEASE,
		.modules = &mod,
		.nr_modules = 1,
		.module_dir = module_dir,
		.log = capture_log,
		.log_ctx = lc,
	};
	struct ivm_syms *s;

	memset(lc, 0, sizeof(*lc));
	cr_assert_null(ivm_syms_create(&cfg, &s));
	return s;
}

Test(symbols_modules, found_by_name_in_the_module_dir, .timeout = 60)
{
	struct guest_module g;
	struct log_capture lc;
	struct ivm_syms *s;
	size_t i;

	need_ko();
	read_guest(&g);
	s = syms_with(&g, BUILD_ID, true, DEBUG_DIR, &lc);
	/* Files are opened at the first address inside the module. */
	cr_assert_null(strstr(lc.text, "module virtio_console"), "log: %s",
		       lc.text);
	ivm_syms_kernel(s, g.syms[0].addr);
	cr_assert(strstr(lc.text, "module virtio_console: symbols from " KO),
		  "log: %s", lc.text);
	for (i = 0; i < g.nr_syms; i++) {
		const struct ivm_sym_location *loc =
			ivm_syms_kernel(s, g.syms[i].addr + 1);

		if (!strcmp(g.syms[i].name, "cleanup_module"))
			continue;	/* an alias: see above */
		cr_assert(same_function(outer(loc), g.syms[i].name),
			  "%s, the guest says %s", outer(loc), g.syms[i].name);
	}
	/* Past the module's code: not named after it. */
	cr_assert_eq(ivm_syms_kernel(s, g.base + g.size + 0x100000)->source,
		     IVM_SYM_SOURCE_NONE);
	ivm_syms_destroy(s);
}

Test(symbols_modules, wrong_build_id_is_named_raw, .timeout = 60)
{
	struct guest_module g;
	struct log_capture lc;
	struct ivm_syms *s;
	const struct ivm_sym_location *loc;
	uint64_t text;
	char want[128];

	need_ko();
	read_guest(&g);
	text = section_addr(&g, ".text");
	s = syms_with(&g, "00112233445566778899aabbccddeeff00112233", true,
		      DEBUG_DIR, &lc);
	loc = ivm_syms_kernel(s, text + 0x74);
	cr_assert(strstr(lc.text, "has build-id " BUILD_ID
			 ", the guest's is 0011"), "log: %s", lc.text);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_MODULE);
	cr_assert_eq(loc->nr_frames, 1);
	snprintf(want, sizeof(want), "virtio_console:+0x%" PRIx64,
		 text + 0x74 - g.base);
	cr_assert_str_eq(loc->frames[0].function, want);
	cr_assert_eq(ivm_syms_kernel(s, text + 0x74), loc);
	ivm_syms_destroy(s);

	/* No base either: named from the section holding it. */
	s = syms_with(&g, "00112233445566778899aabbccddeeff00112233", false,
		      DEBUG_DIR, &lc);
	loc = ivm_syms_kernel(s, section_addr(&g, ".text.unlikely") + 0x10);
	cr_assert_str_eq(loc->frames[0].function,
			 "virtio_console:.text.unlikely+0x10");
	/* Data is not code, and .init.text is gone. */
	cr_assert_eq(ivm_syms_kernel(s, section_addr(&g, ".data") + 8)->source,
		     IVM_SYM_SOURCE_NONE);
	cr_assert_eq(ivm_syms_kernel(s, section_addr(&g, ".init.text") + 8)
		     ->source, IVM_SYM_SOURCE_NONE);
	ivm_syms_destroy(s);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char empty_dir[] = "/tmp/ivm-test-moddir-XXXXXX";

static void remove_empty_dir(void)
{
	if (IVM_TMP_MADE(empty_dir))
		rmdir(empty_dir);
}

Test(symbols_modules, missing_file_and_unknown_build_id,
     .fini = remove_empty_dir)
{
	struct guest_module g;
	struct log_capture lc;
	struct ivm_syms *s;
	const struct ivm_sym_location *loc;
	char *dir = empty_dir;

	read_guest(&g);
	cr_assert(mkdtemp(dir));
	s = syms_with(&g, BUILD_ID, true, dir, &lc);
	loc = ivm_syms_kernel(s, g.syms[3].addr);
	cr_assert(strstr(lc.text, "no module debug files in"), "log: %s",
		  lc.text);
	cr_assert_eq(loc->source, IVM_SYM_SOURCE_MODULE);
	cr_assert(!strncmp(loc->frames[0].function, "virtio_console:+0x", 18));
	ivm_syms_destroy(s);

	/* A file found but no build-id to check it by: used, and said. */
	if (access(KO, R_OK))
		return;
	s = syms_with(&g, NULL, true, DEBUG_DIR, &lc);
	cr_assert(same_function(outer(ivm_syms_kernel(s, g.syms[3].addr)),
				g.syms[3].name));
	cr_assert(strstr(lc.text, "build-id is unknown: not checked"),
		  "log: %s", lc.text);
	ivm_syms_destroy(s);
}

Test(symbols_modules, a_vmlinux_is_not_a_module)
{
	struct ivm_symfile *f;
	struct ivm_sym_section_addr sec = { ".text", 0xffffffffc0000000 };
	struct ivm_sym_error *err;

	err = ivm_symfile_open_module("/proc/self/exe", "self", &sec, 1, &f);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_SYM_ERROR_FORMAT);
	cr_assert(strstr(ivm_sym_error_string(err), "not a relocatable"));
	ivm_sym_error_destroy(err);
	if (access(KO, R_OK))
		return;
	/* A module with no placed code section cannot be placed. */
	sec.name = ".data";
	err = ivm_symfile_open_module(KO, "virtio_console", &sec, 1, &f);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_SYM_ERROR_NOT_FOUND);
	ivm_sym_error_destroy(err);
	/* And an ET_REL file is refused as a plain ELF. */
	err = ivm_symfile_open_elf(KO, &f);
	cr_assert_not_null(err);
	ivm_sym_error_destroy(err);
}
