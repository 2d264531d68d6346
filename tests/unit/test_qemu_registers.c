// SPDX-License-Identifier: MIT
/*
 * `info registers` and `info mtree -f` parsers, on text recorded from a real
 * QEMU 7.2 (tests/unit/transcripts/) and on hostile variations of it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "access/qemu_discovery.h"
#include "access/qemu_registers.h"
#include "test_qmp_fake.h"

static struct ivm_qemu_registers *parse_ok(const char *text)
{
	struct ivm_qemu_registers *regs = NULL;
	struct ivm_error *err;

	err = ivm_qemu_parse_registers(text, strlen(text), &regs);
	cr_assert_null(err, "%s", ivm_error_string(err));
	return regs;
}

static struct ivm_error *parse_err(const char *text)
{
	struct ivm_qemu_registers *regs = NULL;
	struct ivm_error *err;

	err = ivm_qemu_parse_registers(text, strlen(text), &regs);
	cr_assert_not_null(err, "accepted: %.60s", text);
	cr_expect_null(regs);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	return err;
}

Test(qemu_registers, idle_guest_all_cpus)
{
	char *text = fake_recorded_hmp("session.json", "info registers -a", -1);
	struct ivm_qemu_registers *regs = parse_ok(text);
	const struct ivm_qemu_cpu_regs *c0, *c1;
	const uint32_t all = IVM_X86_REGS_GPRS | IVM_X86_REGS_SEGMENTS |
			     IVM_X86_REGS_FS_GS_BASE | IVM_X86_REGS_CRS |
			     IVM_X86_REGS_EFER;

	cr_assert_eq(regs->nr, 2);
	c0 = ivm_qemu_registers_find(regs, 0);
	c1 = ivm_qemu_registers_find(regs, 1);
	cr_assert(c0 && c1);
	cr_expect_null(ivm_qemu_registers_find(regs, 2));
	cr_expect(c0->halted && c1->halted);
	cr_expect(c0->long_mode);
	cr_expect_eq(c0->cpl, 0);
	cr_expect_eq(c0->regs.valid, all);
	cr_expect_eq(c0->regs.rax, 0x1ad40);
	cr_expect_eq(c0->regs.rdx, 0x4000000000000000ull);
	cr_expect_eq(c0->regs.rip, 0xffffffffa2617a0bull);
	cr_expect_eq(c0->regs.rbp, 0xffffffffa361aa40ull);
	cr_expect_eq(c0->regs.rflags, 0x246);
	cr_expect_eq(c0->regs.r15, 0x14790);
	cr_expect_eq(c0->regs.cs, 0x10);
	cr_expect_eq(c0->regs.ss, 0x18);
	cr_expect_eq(c0->regs.gs_base, 0xffff8a4e8f800000ull);
	cr_expect_eq(c0->regs.fs_base, 0);
	cr_expect_eq(c0->regs.cr0, 0x80050033);
	cr_expect_eq(c0->regs.cr2, 0x5794a9);
	cr_expect_eq(c0->regs.cr3, 0x11ee000);
	cr_expect_eq(c0->regs.cr4, 0x6b0);
	cr_expect_eq(c0->regs.efer, 0xd01);
	cr_expect(c0->regs.efer & IVM_X86_EFER_LMA);
	cr_expect_eq(c0->regs.kernel_gs_base, 0);
	cr_expect_eq(c1->regs.gs_base, 0xffff8a4e8f900000ull);
	cr_expect_eq(c1->regs.cr3, 0x2908000);
	free(regs);
	free(text);
}

Test(qemu_registers, one_cpu_with_header)
{
	char *text = fake_recorded_hmp("session.json", "info registers", 1);
	struct ivm_qemu_registers *regs = parse_ok(text);

	cr_assert_eq(regs->nr, 1);
	cr_expect_eq(regs->cpu[0].cpu_index, 1);
	cr_expect_eq(regs->cpu[0].regs.rcx, 0xffff8a4e8f923688ull);
	free(regs);
	free(text);
}

Test(qemu_registers, user_mode_and_running)
{
	char *text = fake_recorded_hmp("busy.json", "info registers -a", -1);
	struct ivm_qemu_registers *regs = parse_ok(text);

	cr_assert_eq(regs->nr, 2);
	/* vCPU 0 spins in a user-space shell loop. */
	cr_expect(!regs->cpu[0].halted);
	cr_expect_eq(regs->cpu[0].cpl, 3);
	cr_expect_eq(regs->cpu[0].regs.cs, 0x33);
	cr_expect_eq(regs->cpu[0].regs.rip, 0x530cc4);
	cr_expect_eq(regs->cpu[0].regs.fs_base, 0x262a33c0);
	cr_expect_eq(regs->cpu[0].regs.gs_base, 0);
	cr_expect(regs->cpu[1].halted);
	cr_expect_eq(regs->cpu[1].cpl, 0);
	free(regs);
	free(text);
}

Test(qemu_registers, reset_vector_32bit_layout)
{
	char *text = fake_recorded_hmp("boot.json", "info registers -a", -1);
	struct ivm_qemu_registers *regs = parse_ok(text);

	/* QEMU started with -S: both vCPUs at the reset vector. */
	cr_assert_eq(regs->nr, 2);
	cr_expect(!regs->cpu[0].long_mode);
	cr_expect(!(regs->cpu[0].regs.valid & IVM_X86_REGS_GPRS));
	cr_expect(regs->cpu[0].regs.valid & IVM_X86_REGS_CRS);
	cr_expect_eq(regs->cpu[0].regs.rip, 0xfff0);
	cr_expect_eq(regs->cpu[0].regs.rdx, 0x60fb1);
	cr_expect_eq(regs->cpu[0].regs.cs, 0xf000);
	cr_expect_eq(regs->cpu[0].regs.cr0, 0x60000010);
	cr_expect(!regs->cpu[0].halted);
	cr_expect(regs->cpu[1].halted);	/* the AP waits for its SIPI */
	free(regs);
	free(text);
}

Test(qemu_registers, no_header_is_one_implicit_cpu)
{
	struct ivm_qemu_registers *regs =
		parse_ok("RIP=ffffffff81000000 RFL=00000002 CPL=0 HLT=0\r\n");

	cr_assert_eq(regs->nr, 1);
	cr_expect_eq(regs->cpu[0].cpu_index, -1);
	cr_expect_eq(regs->cpu[0].regs.rip, 0xffffffff81000000ull);
	cr_expect_eq(regs->cpu[0].regs.valid, 0);
	free(regs);
}

Test(qemu_registers, hostile_text)
{
	static const char *const bad[] = {
		"",
		"\r\n\r\n",
		"Error: no CPU\r\n",
		"CPU#0\r\nRAX=0000000000000000\r\n",		/* no RIP */
		"CPU#0\r\nRIP=1 RIP=2\r\n",			/* duplicate */
		"CPU#0\r\nRIP=00000000000000000\r\n",		/* 17 digits */
		"CPU#0\r\nRIP=\r\n",				/* empty */
		"CPU#0\r\nRIP=12g4\r\n",				/* junk */
		"CPU#0\r\nRIP=1\r\nCPU#0\r\nRIP=1\r\n",		/* CPU twice */
		"CPU#99999999999\r\nRIP=1\r\n",
		"CPU#\r\nRIP=1\r\n",
		"CPU#x\r\nRIP=1\r\n",
		"CPU#0\r\nRIP=1 CPL=4\r\n",
		"CPU#0\r\nRIP=1 HLT=2\r\n",
		"CPU#0\r\nRIP=1\r\nCS =10000 0 0 0\r\n",	/* selector > 16 bits */
		"CPU#0\r\nEIP=100000000\r\n",			/* > 32 bits */
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++)
		ivm_error_destroy(parse_err(bad[i]));
}

Test(qemu_registers, quotes_unexpected_text_safely)
{
	struct ivm_error *err = parse_err("\x1b[31mqemu: \x01weird\r\n");

	cr_expect(strstr(ivm_error_string(err), "?[31mqemu: ?weird"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
}

Test(qemu_registers, nul_bytes_and_truncation)
{
	char *text = fake_recorded_hmp("session.json", "info registers -a", -1);
	size_t len = strlen(text), cut;
	struct ivm_qemu_registers *regs;
	struct ivm_error *err;

	/* Every prefix either parses or fails cleanly. */
	for (cut = 0; cut <= len; cut += 7) {
		regs = NULL;
		err = ivm_qemu_parse_registers(text, cut, &regs);
		cr_assert((err == NULL) != (regs == NULL));
		ivm_error_destroy(err);
		free(regs);
	}
	/* A NUL inside does not end the text early or crash. */
	text[100] = '\0';
	err = ivm_qemu_parse_registers(text, len, &regs);
	ivm_error_destroy(err);
	if (!err)
		free(regs);
	free(text);
}

Test(qemu_registers, too_many_cpus)
{
	size_t n = IVM_QEMU_MAX_VCPUS + 1, i, len = 0;
	char *text = malloc(n * 32);
	struct ivm_qemu_registers *regs = NULL;
	struct ivm_error *err;

	for (i = 0; i < n; i++)
		len += (size_t)sprintf(text + len, "CPU#%zu\nRIP=1\n", i);
	err = ivm_qemu_parse_registers(text, len, &regs);
	cr_assert_not_null(err);
	cr_expect(strstr(ivm_error_string(err), "more than"));
	ivm_error_destroy(err);
	/* One fewer is fine. */
	len = 0;
	for (i = 0; i + 1 < n; i++)
		len += (size_t)sprintf(text + len, "CPU#%zu\nRIP=1\n", i);
	err = ivm_qemu_parse_registers(text, len, &regs);
	cr_assert_null(err);
	cr_expect_eq(regs->nr, IVM_QEMU_MAX_VCPUS);
	free(regs);
	free(text);
}

/* ---- info mtree -f ---------------------------------------------------------- */

Test(qemu_mtree, real_q35_layout)
{
	char *text = fake_recorded_hmp("session.json", "info mtree -f", -1);
	struct ivm_qemu_ram_map *map = NULL;
	struct ivm_error *err;

	err = ivm_qemu_parse_mtree_ram(text, strlen(text), &map);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(map->nr, 5);
	cr_expect(map->piece[0].gpa == 0 && map->piece[0].size == 0xa0000);
	cr_expect_str_eq(map->piece[0].name, "pc.ram");
	cr_expect(map->piece[1].gpa == 0xcb000 &&
		  map->piece[1].offset == 0xcb000);
	cr_expect(map->piece[3].gpa == 0x100000 &&
		  map->piece[3].size == 0xff00000);
	cr_expect_str_eq(map->piece[4].name, "vga.vram");
	free(map);
	free(text);
}

/*
 * Under KVM every range that is a KVM memory slot ends in " KVM" (recorded
 * from QEMU 7.2 with -accel kvm on this project's host): the marker is not
 * part of the name, or gpa2hva's answer, which names the region without
 * it, is refused and no KVM guest can be opened at all.
 */
Test(qemu_mtree, kvm_slot_markers)
{
	char *text = fake_recorded_hmp("kvm-session.json", "info mtree -f", -1);
	char *answer = fake_recorded_hmp("kvm-session.json", "gpa2hva 0x100000", -1);
	struct ivm_qemu_ram_map *map = NULL;
	struct ivm_error *err;
	uint64_t hva = 0;

	cr_assert(strstr(text, "pc.ram KVM"), "not a KVM recording");
	err = ivm_qemu_parse_mtree_ram(text, strlen(text), &map);
	cr_assert_null(err, "%s", ivm_error_string(err));
	/* pc.ram below the ROMs, between them, and from 1 MiB up. */
	cr_assert_eq(map->nr, 3);
	cr_expect(map->piece[0].gpa == 0 && map->piece[0].size == 0xc3000);
	cr_expect(map->piece[1].gpa == 0xe8000 && map->piece[1].size == 0x8000 &&
		  map->piece[1].offset == 0xe8000);
	cr_expect(map->piece[2].gpa == 0x100000 &&
		  map->piece[2].size == 0x20000000 - 0x100000 &&
		  map->piece[2].offset == 0x100000);
	for (size_t i = 0; i < map->nr; i++) {
		cr_expect_str_eq(map->piece[i].name, "pc.ram");
		cr_expect(map->piece[i].kvm_slot);
	}
	err = ivm_qemu_parse_gpa2hva(answer, 0x100000, map->piece[2].name, &hva);
	cr_expect_null(err, "%s", ivm_error_string(err));
	cr_expect_neq(hva, 0);
	free(map);
	free(answer);
	free(text);
}

/* A region whose own name ends in "KVM" keeps it; only the marker goes. */
Test(qemu_mtree, kvm_marker_not_a_name)
{
	static const char text[] =
		"FlatView #0\n"
		" AS \"memory\", root: system\n"
		"  0000000000000000-0000000000000fff (prio 0, ram): myKVM\n"
		"  0000000000001000-0000000000001fff (prio 0, ram): a KVM KVM\n"
		"  0000000000002000-0000000000002fff (prio 0, ram): a KVM @0000000000001000 KVM\n"
		"  0000000000003000-0000000000003fff (prio 0, ram): KVM\n";
	struct ivm_qemu_ram_map *map = NULL;
	struct ivm_error *err;

	err = ivm_qemu_parse_mtree_ram(text, strlen(text), &map);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(map->nr, 3);
	cr_expect_str_eq(map->piece[0].name, "myKVM");
	cr_expect_not(map->piece[0].kvm_slot);
	/* "a KVM" at 0x1000 and its continuation merge into one slot. */
	cr_expect_str_eq(map->piece[1].name, "a KVM");
	cr_expect(map->piece[1].kvm_slot && map->piece[1].size == 0x2000);
	cr_expect_str_eq(map->piece[2].name, "KVM");
	cr_expect_not(map->piece[2].kvm_slot);
	free(map);
}

Test(qemu_mtree, merges_and_splits)
{
	static const char text[] =
		"FlatView #0\r\n"
		" AS \"memory\", root: system\r\n"
		" Root memory region: system\r\n"
		"  0000000000000000-000000000009ffff (prio 0, ram): pc.ram\r\n"
		"  00000000000a0000-00000000000bffff (prio 0, ram): pc.ram @00000000000a0000\r\n"
		"  00000000000c0000-000000007fffffff (prio 0, ram): pc.ram @00000000000c0000\r\n"
		"  0000000080000000-00000000bfffffff (prio 0, i/o): pcie\r\n"
		"  00000000c0000000-00000000c0000fff (prio 0, ramd): bar\r\n"
		"  0000000100000000-000000017fffffff (prio 0, ram): pc.ram @0000000080000000\r\n"
		"  0000000180000000-0000000180000fff (prio 0, ram nv): my mem @ odd name\r\n"
		"\r\n"
		"FlatView #1\r\n"
		" AS \"I/O\", root: io\r\n"
		"  0000000000000000-0000000000000007 (prio 0, ram): not memory\r\n";
	struct ivm_qemu_ram_map *map = NULL;
	struct ivm_error *err;

	err = ivm_qemu_parse_mtree_ram(text, strlen(text), &map);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_assert_eq(map->nr, 3);
	cr_expect(map->piece[0].gpa == 0 && map->piece[0].size == 0x80000000);
	cr_expect(map->piece[1].gpa == 0x100000000ull &&
		  map->piece[1].size == 0x80000000 &&
		  map->piece[1].offset == 0x80000000);
	cr_expect_str_eq(map->piece[2].name, "my mem @ odd name");
	free(map);
}

Test(qemu_mtree, hostile)
{
	static const char *const bad[] = {
		"",
		"FlatView #0\n AS \"I/O\", root: io\n",
		"FlatView #0\n AS \"memory\", root: system\n",
		"FlatView #0\n AS \"memory\", root: system\n"
		"  0000000000002000-0000000000001fff (prio 0, ram): x\n",
		"FlatView #0\n AS \"memory\", root: system\n"
		"  0000000000000000-ffffffffffffffff (prio 0, ram): x\n",
		"FlatView #0\n AS \"memory\", root: system\n"
		"  0000000000001000-0000000000001fff (prio 0, ram): x\n"
		"  0000000000000000-0000000000001fff (prio 0, ram): y\n",
		"FlatView #0\n AS \"memory\", root: system\n"
		"  0000000000000000-0000000000000fff (prio 0, ram: x\n",
		"FlatView #0\n AS \"memory\", root: system\n"
		"  00000000000000000-0000000000000fff (prio 0, ram): x\n",
		"FlatView #0\n AS \"memory\", root: system\nFlatView #1\n"
		" AS \"memory\", root: system\n",
	};
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		struct ivm_qemu_ram_map *map = NULL;
		struct ivm_error *err;

		err = ivm_qemu_parse_mtree_ram(bad[i], strlen(bad[i]), &map);
		cr_expect_not_null(err, "accepted case %zu", i);
		cr_expect_null(map);
		ivm_error_destroy(err);
	}
}

Test(qemu_mtree, gpa2hva_answers)
{
	struct ivm_error *err;
	uint64_t hva = 0;

	err = ivm_qemu_parse_gpa2hva("Host virtual address for 0x100000 (pc.ram) is 0x7f8a77f00000\r\n",
				     0x100000, "pc.ram", &hva);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(hva, 0x7f8a77f00000ull);
	/* Wrong echo, wrong region, junk after the address. */
	err = ivm_qemu_parse_gpa2hva("Host virtual address for 0x100001 (pc.ram) is 0x7f8a77f00000\r\n",
				     0x100000, "pc.ram", &hva);
	cr_expect_eq(err ? err->code : 0, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_qemu_parse_gpa2hva("Host virtual address for 0x100000 (vga.vram) is 0x7f8a77f00000\r\n",
				     0x100000, "pc.ram", &hva);
	cr_expect_eq(err ? err->code : 0, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	err = ivm_qemu_parse_gpa2hva("Host virtual address for 0x100000 (pc.ram) is 0x7f8a77f00000 and more\r\n",
				     0x100000, NULL, &hva);
	cr_expect_eq(err ? err->code : 0, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	/* A name with ") is 0x" inside still parses by its last occurrence. */
	err = ivm_qemu_parse_gpa2hva("Host virtual address for 0x0 (a) is 0x1 b) is 0x2000\r\n",
				     0, NULL, &hva);
	cr_assert_null(err, "%s", ivm_error_string(err));
	cr_expect_eq(hva, 0x2000);
	err = ivm_qemu_parse_gpa2hva("No memory is mapped at address 0x40000000\r\n",
				     0x40000000, NULL, &hva);
	cr_expect_eq(err ? err->code : 0, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
}

Test(qemu_vcpus, parse_query_cpus_fast)
{
	static const char *const bad[] = {
		"{}",
		"[]",
		"[{\"cpu-index\": 0}]",
		"[{\"cpu-index\": 0, \"thread-id\": 0}]",
		"[{\"cpu-index\": -1, \"thread-id\": 5}]",
		"[{\"cpu-index\": 0, \"thread-id\": 5}, {\"cpu-index\": 0, \"thread-id\": 6}]",
		"[{\"cpu-index\": 0, \"thread-id\": 99999999999}]",
		"[{\"cpu-index\": \"0\", \"thread-id\": 5}]",
		"[1]",
	};
	struct ivm_qemu_vcpus *vcpus = NULL;
	struct json_object *reply;
	struct ivm_error *err;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		reply = json_tokener_parse(bad[i]);
		err = ivm_qemu_parse_vcpus(reply, &vcpus);
		cr_expect_not_null(err, "accepted %s", bad[i]);
		cr_expect_eq(err ? err->code : 0, IVM_ERROR_PROTOCOL);
		ivm_error_destroy(err);
		json_object_put(reply);
	}
	reply = json_tokener_parse("[{\"thread-id\": 77, \"cpu-index\": 0, \"target\": \"aarch64\"}]");
	err = ivm_qemu_parse_vcpus(reply, &vcpus);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_INVALID);
	cr_expect(strstr(ivm_error_string(err), "aarch64"));
	ivm_error_destroy(err);
	json_object_put(reply);
}
