// SPDX-License-Identifier: MIT
/*
 * ORC table loading and lookup: hand-made tables, hostile sizes and files,
 * and the real Debian 6.1 vmlinux (loaded in one test process: Criterion
 * forks per test and the file is 590 MB).
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernel/orc.h"
#include "tmp_files.h"

#define VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"
#define SYSTEM_MAP "/var/cache/idlevm/6.1.0-56-cloud-amd64/System.map"

static void put_ip(uint8_t *ipb, size_t i, uint64_t base, uint64_t ip)
{
	int32_t rel = (int32_t)(ip - (base + 4 * i));

	memcpy(ipb + 4 * i, &rel, 4);
}

static void put_v1(uint8_t *orcb, size_t i, int16_t sp_off, int16_t bp_off,
		   unsigned int sp_reg, unsigned int bp_reg, unsigned int type,
		   unsigned int end)
{
	uint8_t *p = orcb + 6 * i;

	memcpy(p, &sp_off, 2);
	memcpy(p + 2, &bp_off, 2);
	p[4] = (uint8_t)(sp_reg | bp_reg << 4);
	p[5] = (uint8_t)(type | end << 2);
}

Test(orc, decode_versions)
{
	struct ivm_orc_entry e;
	/* sp_off -8, bp_off 16, sp_reg SP(5), bp_reg PREV_SP(1) */
	uint8_t raw[6] = { 0xf8, 0xff, 0x10, 0x00, 0x15, 0x00 };

	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.sp_offset, -8);
	cr_assert_eq(e.bp_offset, 16);
	cr_assert_eq(e.sp_reg, IVM_ORC_REG_SP);
	cr_assert_eq(e.bp_reg, IVM_ORC_REG_PREV_SP);
	cr_assert_eq(e.type, IVM_ORC_TYPE_CALL);
	cr_assert_not(e.signal);

	raw[5] = 1;	/* V1: REGS */
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_REGS);
	raw[5] = 2;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_REGS_PARTIAL);
	raw[5] = 3;	/* unassigned in V1 */
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_UNDEFINED);

	/* sp_reg UNDEFINED: end bit decides, in V1 bit 2, in V2 bit 3 */
	raw[4] = 0;
	raw[5] = 1 << 2;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V2, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_UNDEFINED);
	cr_assert(e.signal);
	raw[5] = 1 << 3;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V2, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);
	raw[5] = 0;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V1, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_UNDEFINED);

	/* V3: 3-bit type with its own numbering, signal at bit 3 */
	raw[4] = 0x45;
	raw[5] = 2 | 1 << 3;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V3, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_CALL);
	cr_assert(e.signal);
	cr_assert_eq(e.bp_reg, IVM_ORC_REG_BP);
	raw[5] = 1;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V3, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);
	raw[5] = 3;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V3, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_REGS);
	raw[5] = 4;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V3, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_REGS_PARTIAL);
	raw[5] = 7;
	ivm_orc_decode(raw, IVM_ORC_FORMAT_V3, &e);
	cr_assert_eq(e.type, IVM_ORC_TYPE_UNDEFINED);
	cr_assert_not(e.signal);
}

Test(orc, load_sorts_and_looks_up)
{
	const uint64_t base = 0xffffffff82000000ull;
	uint8_t ipb[4 * 4], orcb[4 * 6];
	struct ivm_orc_table *t = NULL;
	struct ivm_orc_entry e;
	uint64_t start, lo, hi, ip;
	size_t i;

	/* deliberately unsorted */
	put_ip(ipb, 0, base, 0xffffffff81000300ull);
	put_v1(orcb, 0, 0, 0, 0, 0, 0, 0);		/* terminator */
	put_ip(ipb, 1, base, 0xffffffff81000100ull);
	put_v1(orcb, 1, 8, 0, 5, 0, 0, 0);
	put_ip(ipb, 2, base, 0xffffffff81000000ull);
	put_v1(orcb, 2, 0, 0, 0, 0, 0, 1);		/* end hint */
	put_ip(ipb, 3, base, 0xffffffff81000104ull);
	put_v1(orcb, 3, 24, -16, 5, 1, 0, 0);

	cr_assert_null(ivm_orc_load_buffer(ipb, sizeof(ipb), base, orcb,
					   sizeof(orcb), IVM_ORC_FORMAT_AUTO,
					   &t));
	cr_assert_eq(ivm_orc_nr_entries(t), 4);
	cr_assert_eq(ivm_orc_table_format(t), IVM_ORC_FORMAT_V1);
	ivm_orc_ip_range(t, &lo, &hi);
	cr_assert_eq(lo, 0xffffffff81000000ull);
	cr_assert_eq(hi, 0xffffffff81000300ull);
	for (i = 1; i < 4; i++) {
		uint64_t prev;
		struct ivm_orc_entry pe;

		cr_assert(ivm_orc_entry_at(t, i - 1, &prev, &pe));
		cr_assert(ivm_orc_entry_at(t, i, &ip, &e));
		cr_assert_lt(prev, ip);
	}
	cr_assert_not(ivm_orc_entry_at(t, 4, &ip, &e));

	cr_assert_not(ivm_orc_lookup(t, 0xffffffff80ffffffull, &e, NULL));
	cr_assert(ivm_orc_lookup(t, 0xffffffff81000000ull, &e, &start));
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);
	cr_assert(ivm_orc_lookup(t, 0xffffffff810000ffull, &e, &start));
	cr_assert_eq(start, 0xffffffff81000000ull);
	cr_assert(ivm_orc_lookup(t, 0xffffffff81000100ull, &e, &start));
	cr_assert_eq(start, 0xffffffff81000100ull);
	cr_assert_eq(e.sp_offset, 8);
	cr_assert(ivm_orc_lookup(t, 0xffffffff81000103ull, &e, &start));
	cr_assert_eq(start, 0xffffffff81000100ull);
	cr_assert(ivm_orc_lookup(t, 0xffffffff810002ffull, &e, &start));
	cr_assert_eq(start, 0xffffffff81000104ull);
	cr_assert_eq(e.sp_offset, 24);
	cr_assert_eq(e.bp_offset, -16);
	cr_assert_eq(e.bp_reg, IVM_ORC_REG_PREV_SP);
	cr_assert(ivm_orc_lookup(t, 0xffffffff81000300ull, &e, &start));
	cr_assert_eq(e.type, IVM_ORC_TYPE_UNDEFINED);
	cr_assert_not(ivm_orc_lookup(t, 0xffffffff81000301ull, &e, NULL));
	ivm_orc_destroy(t);
	ivm_orc_destroy(NULL);
}

/* The slot ivm_orc_lookup must find for ip, by a walk over every entry. */
static bool walk_lookup(const struct ivm_orc_table *t, uint64_t ip,
			struct ivm_orc_entry *ret, uint64_t *start)
{
	struct ivm_orc_entry e;
	bool found = false;
	uint64_t at;
	size_t i;

	for (i = 0; ivm_orc_entry_at(t, i, &at, &e) && at <= ip; i++) {
		*ret = e;
		*start = at;
		found = true;
	}
	if (found && !ivm_orc_entry_at(t, i, &at, &e) && *start < ip)
		return false;	/* past the terminator: not covered */
	return found;
}

/*
 * The lookup's block index finds what a search of the whole table would:
 * dense tables (a few entries per block, duplicates), and sparse ones whose
 * gaps of up to 64 MiB make the blocks grow; probes at, around and between
 * the entries and at the blocks' edges.
 */
Test(orc, lookup_index_agrees_with_a_walk)
{
	static const uint64_t max_gap[] = { 3, 64, 700, 1ull << 16, 64ull << 20 };
	const uint64_t base = 0xffffffff90000000ull;
	size_t g, round;

	srand(33);
	for (g = 0; g < sizeof(max_gap) / sizeof(max_gap[0]); g++) {
		for (round = 0; round < 4; round++) {
			size_t nr = 1 + (size_t)rand() % 600, i;
			uint8_t *ipb = malloc(4 * nr), *orcb = malloc(6 * nr);
			struct ivm_orc_table *t = NULL;
			uint64_t ip = 0xffffffff81000000ull, lo, hi;

			cr_assert(ipb && orcb);
			for (i = 0; i < nr; i++) {
				/* a unique sp_offset tells the entries apart */
				put_ip(ipb, i, base, ip);
				put_v1(orcb, i, (int16_t)i, 0, 4, 0, 0, 0);
				ip += (uint64_t)rand() % (max_gap[g] + 1);
			}
			cr_assert_null(ivm_orc_load_buffer(ipb, 4 * nr, base,
							   orcb, 6 * nr,
							   IVM_ORC_FORMAT_V1,
							   &t));
			ivm_orc_ip_range(t, &lo, &hi);
			for (i = 0; i < 20 * nr + 200; i++) {
				struct ivm_orc_entry e, want;
				uint64_t probe, start = 0, want_start = 0;
				size_t k = (size_t)rand() % nr;
				bool found;

				ivm_orc_entry_at(t, k, &probe, &e);
				switch (i % 5) {
				case 0: break;
				case 1: probe--; break;
				case 2: probe++; break;
				case 3: /* a block's edge, at either size */
					probe = lo + (((probe - lo) >> 8) << 8) +
						(i & 1 ? 0 : 255);
					break;
				default:
					probe = lo - 2 + (uint64_t)rand() %
						(hi - lo + 4);
				}
				found = ivm_orc_lookup(t, probe, &e, &start);
				cr_assert_eq(found, walk_lookup(t, probe, &want,
								&want_start),
					     "ip 0x%" PRIx64 " (gap %" PRIu64 ")",
					     probe, max_gap[g]);
				if (!found)
					continue;
				cr_assert_eq(start, want_start);
				cr_assert_eq(e.sp_offset, want.sp_offset,
					     "ip 0x%" PRIx64 " (gap %" PRIu64 ")",
					     probe, max_gap[g]);
			}
			ivm_orc_destroy(t);
			free(ipb);
			free(orcb);
		}
	}
}

Test(orc, hostile_sizes)
{
	uint8_t ipb[12] = { 0 }, orcb[18] = { 0 };
	struct ivm_orc_table *t = NULL;
	struct ivm_error *err;

	err = ivm_orc_load_buffer(ipb, 10, 0, orcb, 18, IVM_ORC_FORMAT_V1, &t);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	ivm_error_destroy(err);
	err = ivm_orc_load_buffer(ipb, 12, 0, orcb, 17, IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	ivm_error_destroy(err);
	err = ivm_orc_load_buffer(ipb, 8, 0, orcb, 18, IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	cr_assert(strstr(ivm_error_string(err), "disagree"));
	ivm_error_destroy(err);
	err = ivm_orc_load_buffer(ipb, 0, 0, orcb, 0, IVM_ORC_FORMAT_V1, &t);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	ivm_error_destroy(err);
	cr_assert_null(t);

	/* ips that wrap around the address space are just numbers */
	memset(ipb, 0xff, sizeof(ipb));
	cr_assert_null(ivm_orc_load_buffer(ipb, 12, 0xfffffffffffffff0ull,
					   orcb, 18, IVM_ORC_FORMAT_V1, &t));
	cr_assert_eq(ivm_orc_nr_entries(t), 3);
	ivm_orc_destroy(t);
}

Test(orc, format_for_release)
{
	cr_assert_eq(ivm_orc_format_for_release("6.1.0-56-cloud-amd64"),
		     IVM_ORC_FORMAT_V1);
	cr_assert_eq(ivm_orc_format_for_release("5.10.0"), IVM_ORC_FORMAT_V1);
	cr_assert_eq(ivm_orc_format_for_release("6.3.13"), IVM_ORC_FORMAT_V2);
	cr_assert_eq(ivm_orc_format_for_release("6.4.0"), IVM_ORC_FORMAT_V3);
	cr_assert_eq(ivm_orc_format_for_release("6.12.1+deb13"),
		     IVM_ORC_FORMAT_V3);
	cr_assert_eq(ivm_orc_format_for_release("7.0"), IVM_ORC_FORMAT_V3);
	cr_assert_eq(ivm_orc_format_for_release("linux"), IVM_ORC_FORMAT_AUTO);
	cr_assert_eq(ivm_orc_format_for_release("6"), IVM_ORC_FORMAT_AUTO);
	cr_assert_eq(ivm_orc_format_for_release(""), IVM_ORC_FORMAT_AUTO);
	cr_assert_eq(ivm_orc_format_for_release(NULL), IVM_ORC_FORMAT_AUTO);
}

static int run(const char *cmd)
{
	int rc = system(cmd);

	return rc == -1 ? -1 : WEXITSTATUS(rc);
}

/* Removed by the test's fini, which runs after a failed assertion too. */
static char orc_dir[] = "/tmp/ivm-g-orc-XXXXXX";

static void remove_orc_dir(void)
{
	IVM_TMP_REMOVE_TREE(orc_dir);
}

Test(orc, hostile_elf_files, .fini = remove_orc_dir)
{
	char *dir = orc_dir, path[256], cmd[1024];
	struct ivm_orc_table *t = NULL;
	struct ivm_error *err;
	FILE *f;

	cr_assert_not_null(mkdtemp(dir));

	/* not ELF at all */
	snprintf(path, sizeof(path), "%s/garbage", dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs("this is not an ELF file, just text\n", f);
	fclose(f);
	err = ivm_orc_load_elf(path, IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_ELF, "%s", ivm_error_string(err));
	ivm_error_destroy(err);

	/* missing file */
	snprintf(path, sizeof(path), "%s/missing", dir);
	err = ivm_orc_load_elf(path, IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_eq(err->code, IVM_ERROR_OS);
	ivm_error_destroy(err);

	/* a real ELF without ORC */
	err = ivm_orc_load_elf("/bin/true", IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_eq(err->code, IVM_ERROR_ELF);
	cr_assert(strstr(ivm_error_string(err), "no ORC tables"));
	ivm_error_destroy(err);

	/* ORC sections whose sizes disagree (12 bytes of ips, 12 of entries) */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && head -c 12 /dev/zero > ip && head -c 12 /dev/zero > orc && "
		 "objcopy --add-section .orc_unwind_ip=ip "
		 "--set-section-flags .orc_unwind_ip=alloc,contents,readonly "
		 "--add-section .orc_unwind=orc "
		 "--set-section-flags .orc_unwind=alloc,contents,readonly "
		 "/bin/true bad.elf 2>/dev/null", dir);
	cr_assert_eq(run(cmd), 0, "objcopy failed");
	snprintf(path, sizeof(path), "%s/bad.elf", dir);
	err = ivm_orc_load_elf(path, IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_not_null(err);
	cr_assert_eq(err->code, IVM_ERROR_ELF, "%s", ivm_error_string(err));
	cr_assert(strstr(ivm_error_string(err), "disagree"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);

	/* consistent sizes (3 entries) load, and .orc_header selects V3 */
	snprintf(cmd, sizeof(cmd),
		 "cd %s && head -c 18 /dev/zero > orc && head -c 20 /dev/zero > hdr && "
		 "objcopy --add-section .orc_unwind_ip=ip "
		 "--add-section .orc_unwind=orc --add-section .orc_header=hdr "
		 "/bin/true good.elf 2>/dev/null", dir);
	cr_assert_eq(run(cmd), 0, "objcopy failed");
	snprintf(path, sizeof(path), "%s/good.elf", dir);
	err = ivm_orc_load_elf(path, IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_eq(ivm_orc_nr_entries(t), 3);
	cr_assert_eq(ivm_orc_table_format(t), IVM_ORC_FORMAT_V3);
	ivm_orc_destroy(t);
}

/* ---- the real 6.1 vmlinux ------------------------------------------ */

static bool map_lookup(const char *name, uint64_t *addr)
{
	FILE *f = fopen(SYSTEM_MAP, "r");
	char line[512], sym[256], type;
	bool found = false;
	uint64_t a;

	if (!f)
		return false;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%" SCNx64 " %c %255s", &a, &type, sym) == 3 &&
		    !strcmp(sym, name)) {
			*addr = a;
			found = true;
			break;
		}
	}
	fclose(f);
	return found;
}

Test(orc_vmlinux, debian_6_1_tables, .timeout = 120)
{
	static const char *const c_functions[] = {
		"__schedule", "schedule", "do_syscall_64", "vfs_read",
		"pipe_read", "kthread", "worker_thread", "do_idle",
		"do_nanosleep", "hrtimer_nanosleep", "__x64_sys_read",
	};
	struct ivm_orc_table *t = NULL;
	struct ivm_orc_entry e, pe;
	uint64_t addr, start, lo, hi, ip, prev = 0;
	struct ivm_error *err;
	size_t i, n, ends = 0, regs = 0;

	if (access(VMLINUX, R_OK) || access(SYSTEM_MAP, R_OK))
		cr_skip_test("%s or System.map not present", VMLINUX);

	err = ivm_orc_load_elf(VMLINUX, IVM_ORC_FORMAT_AUTO, &t);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_eq(ivm_orc_table_format(t), IVM_ORC_FORMAT_V1,
		     "6.1 has no .orc_header");

	/* .orc_unwind_ip is 0x167d20 bytes: 368456 four-byte entries */
	n = ivm_orc_nr_entries(t);
	cr_assert_eq(n, 368456);
	for (i = 0; i < n; i++) {
		cr_assert(ivm_orc_entry_at(t, i, &ip, &pe));
		cr_assert_geq(ip, prev, "not sorted at %zu", i);
		prev = ip;
		ends += pe.type == IVM_ORC_TYPE_END_OF_STACK;
		regs += pe.type == IVM_ORC_TYPE_REGS;
	}
	cr_assert_gt(ends, 10);
	cr_assert_gt(regs, 10);

	/* the table covers the text from _stext on */
	ivm_orc_ip_range(t, &lo, &hi);
	cr_assert(map_lookup("_stext", &addr));
	cr_assert_eq(lo, addr);
	cr_assert(map_lookup("_etext", &addr));
	cr_assert_gt(hi, addr);

	/* every C function starts with CFA = sp + 8, a call frame */
	for (i = 0; i < sizeof(c_functions) / sizeof(c_functions[0]); i++) {
		cr_assert(map_lookup(c_functions[i], &addr), "%s",
			  c_functions[i]);
		cr_assert(ivm_orc_lookup(t, addr, &e, &start));
		cr_assert_eq(start, addr, "%s: no entry at its start",
			     c_functions[i]);
		cr_assert_eq(e.type, IVM_ORC_TYPE_CALL, "%s", c_functions[i]);
		cr_assert_eq(e.sp_reg, IVM_ORC_REG_SP, "%s", c_functions[i]);
		cr_assert_eq(e.sp_offset, 8, "%s", c_functions[i]);
		cr_assert_eq(e.bp_reg, IVM_ORC_REG_UNDEFINED, "%s",
			     c_functions[i]);
	}

	/* entry code starts a stack; ret_from_fork too */
	cr_assert(map_lookup("entry_SYSCALL_64", &addr));
	cr_assert(ivm_orc_lookup(t, addr, &e, NULL));
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);
	cr_assert(map_lookup("ret_from_fork", &addr));
	cr_assert(ivm_orc_lookup(t, addr, &e, NULL));
	cr_assert_eq(e.type, IVM_ORC_TYPE_END_OF_STACK);

	/*
	 * Returning from do_syscall_64 lands in entry_SYSCALL_64 at
	 * entry_SYSCALL_64_after_hwframe+0x6e (call at +0x69, 5 bytes):
	 * a full pt_regs sits at sp.
	 */
	cr_assert(map_lookup("entry_SYSCALL_64_after_hwframe", &addr));
	cr_assert(ivm_orc_lookup(t, addr + 0x6e - 1, &e, NULL));
	cr_assert_eq(e.type, IVM_ORC_TYPE_REGS);
	cr_assert_eq(e.sp_reg, IVM_ORC_REG_SP);
	cr_assert_eq(e.sp_offset, 0);
	ivm_orc_destroy(t);
}
