// SPDX-License-Identifier: MIT
/*
 * BTF member lookups: a hand-built BTF (anonymous members, nesting,
 * bitfields, hostile shapes), the guest kernel's vmlinux, and the host
 * kernel's own /sys/kernel/btf/vmlinux.
 */
#include <criterion/criterion.h>
#include <bpf/btf.h>
#include <string.h>
#include <unistd.h>

#include "kernel/btf.h"

#define GUEST_VMLINUX "/var/cache/idlevm/6.1.0-56-cloud-amd64/vmlinux"
#define HOST_BTF "/sys/kernel/btf/vmlinux"

/* Serialize a libbpf BTF and load it the way guest blobs are loaded. */
static struct ivm_btf *load_built(struct btf *b)
{
	struct ivm_btf *btf = NULL;
	struct ivm_error *err;
	const void *raw;
	uint32_t size;

	raw = btf__raw_data(b, &size);
	cr_assert_not_null(raw);
	err = ivm_btf_load_blob(raw, size, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	btf__free(b);
	return btf;
}

/*
 * struct inner { int a; long b; };
 * struct outer {
 *	int x;                        0
 *	union {                       8
 *		int y;
 *		struct { long z; int w; };
 *	};
 *	struct inner in;              24
 *	const inner_t *pin;           40
 *	unsigned int bf:3;            48 (bitfield)
 *	char name[16];                52
 *	inner_t td;                   72 (typedef'd struct)
 * };                             size 88
 */
static struct ivm_btf *build_outer(void)
{
	struct btf *b = btf__new_empty();
	int t_int, t_long, t_uint, t_char, t_inner, t_inner_td, t_const, t_ptr;
	int t_anon_s, t_anon_u, t_arr;

	cr_assert_not_null(b);
	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	t_long = btf__add_int(b, "long", 8, BTF_INT_SIGNED);
	t_uint = btf__add_int(b, "unsigned int", 4, 0);
	t_char = btf__add_int(b, "char", 1, BTF_INT_CHAR);
	t_inner = btf__add_struct(b, "inner", 16);
	btf__add_field(b, "a", t_int, 0, 0);
	btf__add_field(b, "b", t_long, 64, 0);
	t_inner_td = btf__add_typedef(b, "inner_t", t_inner);
	t_const = btf__add_const(b, t_inner_td);
	t_ptr = btf__add_ptr(b, t_const);
	t_anon_s = btf__add_struct(b, NULL, 16);
	btf__add_field(b, "z", t_long, 0, 0);
	btf__add_field(b, "w", t_int, 64, 0);
	t_anon_u = btf__add_union(b, NULL, 16);
	btf__add_field(b, "y", t_int, 0, 0);
	btf__add_field(b, NULL, t_anon_s, 0, 0);
	t_arr = btf__add_array(b, t_int, t_char, 16);
	btf__add_struct(b, "outer", 88);
	btf__add_field(b, "x", t_int, 0, 0);
	btf__add_field(b, NULL, t_anon_u, 64, 0);
	btf__add_field(b, "in", t_inner, 192, 0);
	btf__add_field(b, "pin", t_ptr, 320, 0);
	btf__add_field(b, "bf", t_uint, 384, 3);
	btf__add_field(b, "name", t_arr, 416, 0);
	btf__add_field(b, "td", t_inner_td, 576, 0);
	btf__add_enum(b, "colour", 4);
	btf__add_enum_value(b, "RED", 1);
	btf__add_enum_value(b, "GREEN", -7);
	return load_built(b);
}

static void expect_member(const struct ivm_btf *btf, const char *type,
			  const char *path, uint64_t offset, uint64_t size)
{
	struct ivm_btf_member m;
	struct ivm_error *err = ivm_btf_member_find(btf, type, path, &m);

	cr_assert_null(err, "%s.%s: %s", type, path,
		       err ? ivm_error_string(err) : "");
	cr_expect_eq(m.offset, offset, "%s.%s offset %llu, want %llu", type,
		     path, (unsigned long long)m.offset,
		     (unsigned long long)offset);
	cr_expect_eq(m.size, size, "%s.%s size %llu, want %llu", type, path,
		     (unsigned long long)m.size, (unsigned long long)size);
}

static void expect_error(const struct ivm_btf *btf, const char *type,
			 const char *path, enum ivm_error_code code,
			 const char *needle)
{
	struct ivm_btf_member m;
	struct ivm_error *err = ivm_btf_member_find(btf, type, path, &m);

	cr_assert_not_null(err, "%s.%s unexpectedly found", type, path);
	cr_expect_eq(err->code, code, "%s.%s: code %d (%s)", type, path,
		     err->code, ivm_error_string(err));
	cr_expect(strstr(ivm_error_string(err), needle), "'%s' lacks '%s'",
		  ivm_error_string(err), needle);
	ivm_error_destroy(err);
}

Test(btf_synthetic, member_paths)
{
	struct ivm_btf *btf = build_outer();
	uint64_t size;

	expect_member(btf, "outer", "x", 0, 4);
	expect_member(btf, "outer", "y", 8, 4);		/* anonymous union */
	expect_member(btf, "outer", "z", 8, 8);		/* anon struct in it */
	expect_member(btf, "outer", "w", 16, 4);
	expect_member(btf, "outer", "in", 24, 16);
	expect_member(btf, "outer", "in.b", 32, 8);
	expect_member(btf, "outer", "pin", 40, 8);
	expect_member(btf, "outer", "name", 52, 16);
	expect_member(btf, "outer", "td.b", 80, 8);	/* through typedef */
	cr_assert_null(ivm_btf_type_size(btf, "outer", &size));
	cr_expect_eq(size, 88);
	cr_assert_null(ivm_btf_type_size(btf, "inner", &size));
	cr_expect_eq(size, 16);
	ivm_btf_destroy(btf);
}

Test(btf_synthetic, errors_name_what_is_missing)
{
	struct ivm_btf *btf = build_outer();
	uint64_t size;
	struct ivm_error *err;

	expect_error(btf, "outer", "nope", IVM_ERROR_NOT_FOUND, "'nope'");
	expect_error(btf, "outer", "in.c", IVM_ERROR_NOT_FOUND, "'c'");
	expect_error(btf, "nostruct", "x", IVM_ERROR_NOT_FOUND, "nostruct");
	expect_error(btf, "outer", "bf", IVM_ERROR_INVALID, "bitfield");
	expect_error(btf, "outer", "x.y", IVM_ERROR_INVALID, "not in a struct");
	/* A pointer is not followed: pin.a would need a guest read. */
	expect_error(btf, "outer", "pin.a", IVM_ERROR_INVALID,
		     "not in a struct");
	expect_error(btf, "outer", "", IVM_ERROR_INVALID, "empty");
	expect_error(btf, "outer", "in.", IVM_ERROR_INVALID, "bad member path");
	expect_error(btf, "outer", ".x", IVM_ERROR_INVALID, "bad member path");
	expect_error(btf, "outer", "in..b", IVM_ERROR_INVALID,
		     "bad member path");
	err = ivm_btf_type_size(btf, "missing", &size);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	ivm_btf_destroy(btf);
}

Test(btf_synthetic, enum_values)
{
	struct ivm_btf *btf = build_outer();
	struct ivm_error *err;
	int64_t v;

	cr_assert_null(ivm_btf_enum_value(btf, "colour", "RED", &v));
	cr_expect_eq(v, 1);
	cr_assert_null(ivm_btf_enum_value(btf, NULL, "GREEN", &v));
	cr_expect_eq(v, -7);
	err = ivm_btf_enum_value(btf, "colour", "BLUE", &v);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	cr_expect(strstr(ivm_error_string(err), "BLUE"));
	ivm_error_destroy(err);
	err = ivm_btf_enum_value(btf, "other", "RED", &v);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	ivm_btf_destroy(btf);
}

/* An anonymous struct containing itself must end, not recurse forever. */
Test(btf_synthetic, self_nesting_anonymous_struct_ends)
{
	struct btf *b = btf__new_empty();
	int t_int, t_self;
	struct ivm_btf *btf;

	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	t_self = btf__add_struct(b, NULL, 8);
	btf__add_field(b, "a", t_int, 0, 0);
	cr_assert_gt(btf__add_field(b, NULL, t_self, 32, 0), -1);
	btf__add_struct(b, "loop", 8);
	btf__add_field(b, NULL, t_self, 0, 0);
	btf = load_built(b);
	expect_member(btf, "loop", "a", 0, 4);
	expect_error(btf, "loop", "missing", IVM_ERROR_PROTOCOL, "too deep");
	ivm_btf_destroy(btf);
}

/* A typedef chain that loops has no size. */
Test(btf_synthetic, typedef_loop_has_no_size)
{
	struct btf *b = btf__new_empty();
	int t_td1, t_td2;
	struct ivm_btf *btf;
	struct ivm_btf_member m;
	struct ivm_error *err;

	/* td1 -> td2 -> td1: ids are known before they are added. */
	t_td1 = btf__add_typedef(b, "td1", 2);
	t_td2 = btf__add_typedef(b, "td2", t_td1);
	cr_assert_eq(t_td2, 2);
	btf__add_struct(b, "s", 8);
	btf__add_field(b, "m", t_td1, 0, 0);
	btf = load_built(b);
	err = ivm_btf_member_find(btf, "s", "m", &m);
	cr_assert_not_null(err);
	cr_expect(strstr(ivm_error_string(err), "too deep"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	ivm_btf_destroy(btf);
}

Test(btf_synthetic, hostile_blobs_are_refused)
{
	static const uint8_t garbage[64] = { 0x9f, 0xeb, 1, 0, 24, 0, 0, 0 };
	struct ivm_btf *btf = NULL;
	struct ivm_error *err;
	struct btf *b = btf__new_empty();
	const uint8_t *raw;
	uint32_t size, cut;

	err = ivm_btf_load_blob(garbage, sizeof(garbage), &btf);
	cr_assert_not_null(err);
	cr_expect_null(btf);
	ivm_error_destroy(err);
	err = ivm_btf_load_blob(garbage, 0, &btf);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	/* Over the cap: refused before libbpf reads a byte. */
	err = ivm_btf_load_blob(garbage, (size_t)IVM_BTF_MAX_SIZE + 1, &btf);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_PROTOCOL);
	ivm_error_destroy(err);
	/* Every truncation of a valid blob is refused or loads cleanly. */
	btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	btf__add_struct(b, "s", 4);
	btf__add_field(b, "m", 1, 0, 0);
	raw = btf__raw_data(b, &size);
	for (cut = 1; cut < size; cut++) {
		err = ivm_btf_load_blob(raw, cut, &btf);
		cr_expect_not_null(err, "blob cut at %u of %u loaded", cut,
				   size);
		ivm_error_destroy(err);
	}
	btf__free(b);
}

/* A task_struct without pid: the error must name it. */
Test(btf_synthetic, kernel_offsets_name_missing_member)
{
	struct btf *b = btf__new_empty();
	struct ivm_kernel_offsets o;
	struct ivm_btf *btf;
	struct ivm_error *err;
	int t_int;

	t_int = btf__add_int(b, "int", 4, BTF_INT_SIGNED);
	btf__add_struct(b, "list_head", 16);
	btf__add_struct(b, "task_struct", 64);
	btf__add_field(b, "tasks", t_int + 1, 0, 0);
	btf__add_field(b, "tgid", t_int, 128, 0);
	btf = load_built(b);
	err = ivm_kernel_offsets_from_btf(btf, &o);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	cr_expect(strstr(ivm_error_string(err), "task_struct.pid"), "%s",
		  ivm_error_string(err));
	ivm_error_destroy(err);
	ivm_btf_destroy(btf);
}

static void check_offsets_sane(const struct ivm_kernel_offsets *o)
{
	const uint32_t task[] = {
		o->task_tasks, o->task_pid, o->task_tgid, o->task_comm,
		o->task_state, o->task_flags, o->task_cpu, o->task_stack,
		o->task_mm, o->task_nvcsw, o->task_nivcsw, o->task_signal,
		o->task_thread_sp,
	};
	size_t i;

	for (i = 0; i < sizeof(task) / sizeof(task[0]); i++)
		cr_expect_lt(task[i], o->task_struct_size, "member %zu", i);
	cr_expect_eq(o->task_comm_size, 16);
	cr_expect_eq(o->task_tgid, o->task_pid + 4);
	cr_expect_eq(o->task_nivcsw, o->task_nvcsw + 8);
	cr_expect_eq(o->list_head_next, 0);
	/* pt_regs is user ABI: 21 slots of 8 bytes. */
	cr_expect_eq(o->pt_regs_size, 168);
	cr_expect_eq(o->pt_regs_ip, 128);
	cr_expect_eq(o->pt_regs_sp, 152);
	cr_expect_eq(o->pt_regs_orig_ax, 120);
	cr_expect_neq(o->inactive_task_frame_size, IVM_KOFF_NONE);
	/* Thread list: either signal->thread_head or thread_group. */
	cr_expect(o->signal_thread_head != IVM_KOFF_NONE ||
		  o->task_thread_group != IVM_KOFF_NONE);
}

Test(btf_real, guest_vmlinux_6_1)
{
	struct ivm_kernel_offsets o;
	struct ivm_btf *btf;
	struct ivm_btf_member m;
	struct ivm_error *err;

	if (access(GUEST_VMLINUX, R_OK)) {
		cr_skip_test("%s absent: run make image",
			     GUEST_VMLINUX);
	}
	err = ivm_btf_load_file(GUEST_VMLINUX, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	err = ivm_kernel_offsets_from_btf(btf, &o);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	check_offsets_sane(&o);
	/*
	 * Cross-checked against the DWARF of the same vmlinux with gdb
	 * (p &((struct task_struct *)0)->pid etc.), for this exact build.
	 */
	cr_expect_eq(o.task_struct_size, 9728);
	cr_expect_eq(o.task_pid, 2416);
	cr_expect_eq(o.task_thread_sp, 5336);
	cr_expect_eq(o.task_signal, 3072);
	cr_expect_eq(o.signal_thread_head, 16);
	cr_expect_eq(o.rq_idle, 2408);
	/*
	 * 6.1: __state, no pcpu_hot yet, thread_group still there, and the
	 * CPU in thread_info (moved back from task_struct in 5.16).
	 */
	cr_expect_eq(o.task_state_size, 4);
	cr_expect_eq(o.pcpu_hot_current_task, IVM_KOFF_NONE);
	cr_expect_neq(o.task_thread_group, IVM_KOFF_NONE);
	err = ivm_btf_member_find(btf, "task_struct", "cpu", &m);
	cr_assert_not_null(err);
	cr_expect_eq(err->code, IVM_ERROR_NOT_FOUND);
	ivm_error_destroy(err);
	cr_assert_null(ivm_btf_member_find(btf, "task_struct",
					   "thread_info.cpu", &m));
	cr_expect_eq(m.offset, o.task_cpu);
	cr_expect_eq(m.size, 4);
	cr_assert_null(ivm_btf_member_find(btf, "task_struct",
					   "thread.fsbase", &m));
	cr_expect_eq(m.offset, o.task_thread_fsbase);
	cr_expect_eq(m.size, 8);
	ivm_btf_destroy(btf);
}

/* The DWARF fallback must give exactly what BTF gives. */
Test(btf_real, dwarf_fallback_matches_btf)
{
	struct ivm_kernel_offsets from_btf, from_dwarf;
	struct ivm_btf *btf;
	struct ivm_error *err;

	if (access(GUEST_VMLINUX, R_OK)) {
		cr_skip_test("%s absent: run make image",
			     GUEST_VMLINUX);
	}
	err = ivm_btf_load_file(GUEST_VMLINUX, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_assert_null(ivm_kernel_offsets_from_btf(btf, &from_btf));
	ivm_btf_destroy(btf);
	err = ivm_btf_load_dwarf(GUEST_VMLINUX, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	err = ivm_kernel_offsets_from_btf(btf, &from_dwarf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	cr_expect_eq(from_dwarf.task_pid, from_btf.task_pid);
	cr_expect_eq(from_dwarf.task_cpu, from_btf.task_cpu);
	cr_expect_eq(from_dwarf.task_thread_sp, from_btf.task_thread_sp);
	cr_expect_eq(from_dwarf.rq_idle, from_btf.rq_idle);
	cr_expect(!memcmp(&from_dwarf, &from_btf, sizeof(from_btf)),
		  "DWARF and BTF offsets differ");
	ivm_btf_destroy(btf);
}

Test(btf_real, host_kernel_btf)
{
	struct ivm_kernel_offsets o;
	struct ivm_btf *btf;
	struct ivm_error *err;

	if (access(HOST_BTF, R_OK))
		cr_skip_test("%s absent (host kernel without BTF)", HOST_BTF);
	err = ivm_btf_load_file(HOST_BTF, &btf);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	err = ivm_kernel_offsets_from_btf(btf, &o);
	cr_assert_null(err, "%s", err ? ivm_error_string(err) : "");
	check_offsets_sane(&o);
	ivm_btf_destroy(btf);
}

Test(btf_real, missing_file)
{
	struct ivm_btf *btf = NULL;
	struct ivm_error *err = ivm_btf_load_file("/nonexistent/ivm-f", &btf);

	cr_assert_not_null(err);
	cr_expect_null(btf);
	cr_expect(strstr(ivm_error_string(err), "/nonexistent/ivm-f"));
	ivm_error_destroy(err);
}

/* irq_cpustat_t is a typedef of an anonymous struct: found through it. */
Test(btf_real, irq_cpustat_typedef_6_1)
{
	struct ivm_btf_member m;
	struct ivm_btf *btf;
	struct ivm_error *err;

	if (access(GUEST_VMLINUX, R_OK))
		cr_skip_test("%s absent: run make image", GUEST_VMLINUX);
	err = ivm_btf_load_file(GUEST_VMLINUX, &btf);
	cr_assert_null(err, "%s", err ? err->message : "");
	cr_assert_null(ivm_btf_member_find(btf, "irq_cpustat_t",
					   "apic_timer_irqs", &m));
	cr_assert_eq(m.size, 4);
	cr_assert_null(ivm_btf_member_find(btf, "irq_cpustat_t",
					   "irq_resched_count", &m));
	cr_assert_null(ivm_btf_member_find(btf, "irq_cpustat_t",
					   "irq_call_count", &m));
	cr_assert_null(ivm_btf_member_find(btf, "kernel_stat", "irqs_sum", &m));
	cr_assert_eq(m.size, 8);
	/* A typedef of a scalar is no struct. */
	err = ivm_btf_member_find(btf, "u32", "x", &m);
	cr_assert_not_null(err);
	ivm_error_destroy(err);
	ivm_btf_destroy(btf);
}
